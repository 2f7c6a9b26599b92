"""Batch RecipeDataset items: drop frames with nothing to train on, keep chat messages as lists.

Message lists differ in length and structure from sample to sample, so they stay plain Python
lists (one entry per sample); numbers and arrays go through torch's `default_collate`, the dataset
features in their own mapping (`features`, by feature name). Camera frames are stacked per camera
when every sample carries that camera at the same size.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch.utils.data import default_collate

__all__ = ["LIST_KEYS", "collate"]

# Keys kept as one plain list per batch (the reference's preserved keys).
LIST_KEYS = frozenset(
    {"messages", "message_streams", "target_message_indices", "language_persistent", "language_events"}
)
_IMAGES = "images"


def collate(batch: Sequence[Mapping[str, Any] | None]) -> dict[str, Any] | None:
    """Collate samples into a batch; None samples are dropped, and an all-None batch gives None.

    Raises:
        ValueError: samples disagree on which keys they carry.
    """
    samples = [s for s in batch if s is not None]
    if not samples:
        return None
    keys = list(samples[0])
    _check_keys(samples)
    for key in keys:
        if key not in LIST_KEYS and key != _IMAGES and isinstance(samples[0][key], Mapping):
            _check_keys([s[key] for s in samples], f"{key}.")  # `features`: by dataset feature name
    out: dict[str, Any] = {}
    plain = [k for k in keys if k not in LIST_KEYS and k != _IMAGES]
    if plain:
        out.update(default_collate([{k: s[k] for k in plain} for s in samples]))
    for key in keys:
        if key in LIST_KEYS:
            out[key] = [s[key] for s in samples]
        elif key == _IMAGES:
            out[key] = _collate_images([s[key] for s in samples])
    return out


def _check_keys(samples: Sequence[Mapping[str, Any]], prefix: str = "") -> None:
    for key in dict.fromkeys(k for s in samples for k in s):
        count = sum(key in s for s in samples)
        if count != len(samples):
            raise ValueError(
                f"Inconsistent batch: {count}/{len(samples)} samples carry {prefix}{key!r}; every sample in a batch "
                "must agree (build every sample with the same dataset settings)"
            )


def _collate_images(per_sample: list[Mapping[str, Any]]) -> dict[str, Any]:
    """Per camera: a stacked (B, H, W, 3) tensor, or a list with None where a sample lacks the camera."""
    cameras = dict.fromkeys(cam for images in per_sample for cam in images)
    out: dict[str, Any] = {}
    for cam in cameras:
        frames = [_as_tensor(images[cam]) if cam in images else None for images in per_sample]
        shapes = {tuple(f.shape) for f in frames if f is not None}
        if all(f is not None for f in frames) and len(shapes) == 1:
            out[cam] = torch.stack(frames)  # type: ignore[arg-type]  # no None: checked above
        else:
            out[cam] = frames
    return out


def _as_tensor(frame: Any) -> torch.Tensor:
    return frame if isinstance(frame, torch.Tensor) else torch.as_tensor(frame)
