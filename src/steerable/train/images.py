"""The camera frames a rendered sample's image blocks name: which ones, their file names, their JPEG bytes;
and an episode's frames resized for a model (`resized_frames`, the policy's training images)."""

from __future__ import annotations

import io
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from PIL import Image

from steerable.dataset import LeRobotDataset

if TYPE_CHECKING:
    import torch

__all__ = ["DECODE_WINDOW", "camera_slug", "frame_jpegs", "image_features", "image_name", "resized_frames"]

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


# Frames decoded per call of `resized_frames`: one sequential pass per window, so an episode's
# full-size frames are never all in memory (a minute at 640x480 is 1.6 GB), at the cost of one
# seek per window (under a GOP of decoding, from the keyframe before it).
DECODE_WINDOW = 256
# The decoder's threads for training frames. The training step runs on the same cores (one torch
# thread for the tiny model), so decoder threads only compete with it: on a stream with several
# slices, or AV1, FFmpeg's automatic count spent more CPU (and ~3 context switches a frame) for
# little or no gain in wall time on 2 cores (benchmarks/README.md, "Where `steerable train`'s time
# goes"). The same pixels either way (tests/test_decode_threads.py).
DECODE_THREADS = 1


def resized_frames(dataset: LeRobotDataset, episode_index: int, camera: str, timestamps: Sequence[float],
                   size: int) -> torch.Tensor:
    """One camera's frames at episode times `timestamps`, resized to `size` x `size`: a (N, size, size, 3)
    uint8 torch tensor (antialiased bilinear, rounded).

    Each frame is resized on its own as it is decoded. The same resize over a whole episode at once
    gives the same pixels but works on a float copy of every full-size frame: 15 ms a frame at
    640x480 against 1 ms (benchmarks/README.md, "policy.py")."""
    import torch  # here, not at the top: the rest of this module serves the torch-free export
    import torch.nn.functional as F

    out = torch.empty((len(timestamps), size, size, 3), dtype=torch.uint8)
    for start in range(0, len(timestamps), DECODE_WINDOW):
        window = dataset.decode_frames(episode_index, camera, list(timestamps[start:start + DECODE_WINDOW]),
                                       threads=DECODE_THREADS)
        for k, frame in enumerate(window):
            x = torch.from_numpy(frame).permute(2, 0, 1)[None].float()
            x = F.interpolate(x, size=(size, size), mode="bilinear", antialias=True)
            out[start + k] = x[0].round().clamp(0, 255).to(torch.uint8).permute(1, 2, 0)
    return out
