"""Small signal helpers shared by the keystate and primitive detectors (pure numpy)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

import numpy as np

__all__ = ["as_matrix", "frame_period", "moving_average", "runs", "velocity", "window_frames"]

T = TypeVar("T")


def as_matrix(values: np.ndarray) -> np.ndarray:
    """`values` as a (frames, dims) float64 array; a 1-D signal becomes one column."""
    data = np.asarray(values, dtype=np.float64)
    return data[:, None] if data.ndim == 1 else data


def frame_period(timestamps: np.ndarray) -> float:
    """The typical time between frames (median step); 1.0 for fewer than two frames."""
    if len(timestamps) < 2:
        return 1.0
    step = float(np.median(np.diff(timestamps.astype(np.float64))))
    return step if step > 0 else 1.0


def window_frames(seconds: float, timestamps: np.ndarray) -> int:
    """An odd window length in frames covering about `seconds`."""
    frames = int(round(seconds / frame_period(timestamps)))
    return max(1, frames | 1)


def moving_average(values: np.ndarray, window: int) -> np.ndarray:
    """Centred moving average along axis 0; edges repeat the end values so length is kept."""
    data = np.asarray(values, dtype=np.float64)
    if window <= 1 or len(data) == 0:
        return np.array(data, copy=True)
    half = window // 2
    padded = np.concatenate([np.repeat(data[:1], half, axis=0), data, np.repeat(data[-1:], half, axis=0)])
    csum = np.cumsum(padded, axis=0)
    csum = np.concatenate([np.zeros_like(csum[:1]), csum])
    averaged: np.ndarray = (csum[window:] - csum[:-window]) / window
    return averaged


def velocity(timestamps: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Time derivative along axis 0 (central differences); zeros for fewer than two frames."""
    data = np.asarray(values, dtype=np.float64)
    if len(data) < 2:
        return np.zeros_like(data)
    times = timestamps.astype(np.float64)
    if np.any(np.diff(times) <= 0):
        # Repeated or unordered stored timestamps: fall back to an even frame clock.
        times = np.arange(len(data), dtype=np.float64) * frame_period(timestamps)
    return np.gradient(data, times, axis=0)


def runs(labels: Sequence[T]) -> list[tuple[int, int, T]]:
    """Maximal runs of equal labels as (start, end exclusive, label)."""
    out: list[tuple[int, int, T]] = []
    start = 0
    for i in range(1, len(labels) + 1):
        if i == len(labels) or labels[i] != labels[start]:
            out.append((start, i, labels[start]))
            start = i
    return out
