"""The camera frames a rendered sample's image blocks name: which ones, their file names, their JPEG bytes."""

from __future__ import annotations

import io
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
from PIL import Image

from steerable.dataset import LeRobotDataset

__all__ = ["camera_slug", "frame_jpegs", "image_features", "image_name"]

_CAMERA_PREFIX = "observation.images."


def image_features(messages: Sequence[Mapping[str, Any]]) -> list[str]:
    """The camera keys the image blocks of `messages` name, in order of first appearance."""
    keys: dict[str, None] = {}
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            for block in content:
                if isinstance(block, Mapping) and block.get("type") == "image" and block.get("feature"):
                    keys[str(block["feature"])] = None
    return list(keys)


def camera_slug(key: str) -> str:
    """A file-name-safe short name of a camera key: `observation.images.top` -> `top`."""
    short = key[len(_CAMERA_PREFIX):] if key.startswith(_CAMERA_PREFIX) else key
    return re.sub(r"[^A-Za-z0-9_-]+", "_", short).strip("_") or "camera"


def image_name(episode_index: int, frame_index: int, camera: str) -> str:
    """The JPEG file name of one camera frame, e.g. `ep000012_f000034_top.jpg`."""
    return f"ep{episode_index:06d}_f{frame_index:06d}_{camera_slug(camera)}.jpg"


def frame_jpegs(
    dataset: LeRobotDataset, episode_index: int, frames: Iterable[tuple[int, float, str]], quality: int
) -> dict[tuple[int, str], bytes]:
    """JPEG bytes for each (frame_index, timestamp, camera) of one episode; one decode pass per camera."""
    wanted: dict[str, dict[int, float]] = {}
    for frame_index, timestamp, camera in frames:
        wanted.setdefault(camera, {})[frame_index] = timestamp
    out: dict[tuple[int, str], bytes] = {}
    for camera, stamps in wanted.items():
        arrays = dataset.decode_frames(episode_index, camera, list(stamps.values()))
        for frame_index, array in zip(stamps, arrays, strict=True):
            out[(frame_index, camera)] = _jpeg(array, quality)
    return out


def _jpeg(array: np.ndarray, quality: int) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, format="JPEG", quality=quality)
    return buffer.getvalue()
