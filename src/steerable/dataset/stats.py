"""Feature statistics as LeRobot stores them: per episode in the episodes parquet, pooled in stats.json.

Each feature gets min, max, mean, std, count and the quantiles q01..q99. Numeric features are
reduced over frames (one value per dimension); camera features over the pixels of a subsample of
frames, per channel, scaled to 0..1, with LeRobot's (3, 1, 1) shape.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = [
    "QUANTILES",
    "ImageStatsAccumulator",
    "aggregate_stats",
    "numeric_stats",
    "sample_frame_indices",
    "stats_to_lists",
]

Stats = dict[str, np.ndarray]

QUANTILES = {"q01": 0.01, "q10": 0.10, "q50": 0.50, "q90": 0.90, "q99": 0.99}
_CHANNEL_OFFSETS = np.array([0, 256, 512], dtype=np.intp)


def numeric_stats(values: np.ndarray) -> Stats:
    """Stats over the frames (axis 0) of an (n, d) array; integer features keep integer min/max."""
    arr = np.asarray(values)
    if arr.ndim == 1:
        arr = arr[:, None]
    wide = arr.astype(np.float64)
    out: Stats = {
        "min": arr.min(axis=0),
        "max": arr.max(axis=0),
        "mean": wide.mean(axis=0),
        "std": wide.std(axis=0),
        "count": np.array([len(arr)], dtype=np.int64),
    }
    if not np.issubdtype(arr.dtype, np.integer):
        out["min"], out["max"] = out["min"].astype(np.float64), out["max"].astype(np.float64)
    for name, q in QUANTILES.items():
        out[name] = np.quantile(wide, q, axis=0)
    return out


def sample_frame_indices(length: int) -> np.ndarray:
    """Evenly spaced frames for camera stats: about length**0.75, at least 100 (or all), at most 10k."""
    n = max(min(100, length), min(int(length**0.75), 10_000))
    return np.unique(np.round(np.linspace(0, length - 1, n)).astype(np.int64))


class ImageStatsAccumulator:
    """Exact per-channel pixel statistics from 256-bin histograms of the frames it is given."""

    def __init__(self) -> None:
        self.hist = np.zeros((3, 256), dtype=np.int64)
        self.frames = 0

    def add(self, frame: np.ndarray) -> None:
        # One bincount for all channels: channel c's values are shifted into bins c*256..c*256+255.
        shifted = frame.reshape(-1, 3).astype(np.intp) + _CHANNEL_OFFSETS
        self.hist += np.bincount(shifted.ravel(), minlength=768).reshape(3, 256)
        self.frames += 1

    def stats(self) -> Stats:
        levels = np.arange(256, dtype=np.float64) / 255.0
        per_channel: dict[str, list[float]] = {k: [] for k in ("min", "max", "mean", "std", *QUANTILES)}
        for hist in self.hist:
            total = int(hist.sum())
            present = np.flatnonzero(hist)
            mean = float((levels * hist).sum() / total)
            per_channel["min"].append(float(levels[present[0]]))
            per_channel["max"].append(float(levels[present[-1]]))
            per_channel["mean"].append(mean)
            per_channel["std"].append(float(np.sqrt(((levels - mean) ** 2 * hist).sum() / total)))
            cumulative = np.cumsum(hist)
            for name, q in QUANTILES.items():
                per_channel[name].append(_hist_quantile(cumulative, levels, q))
        out: Stats = {k: np.array(v, dtype=np.float64).reshape(3, 1, 1) for k, v in per_channel.items()}
        out["count"] = np.array([self.frames], dtype=np.int64)
        return out


def _hist_quantile(cumulative: np.ndarray, levels: np.ndarray, q: float) -> float:
    """numpy's default (linear) quantile of the values a histogram describes."""
    pos = q * (int(cumulative[-1]) - 1)
    lo, hi = int(np.floor(pos)), int(np.ceil(pos))
    v_lo = levels[np.searchsorted(cumulative, lo, side="right")]
    v_hi = levels[np.searchsorted(cumulative, hi, side="right")]
    return float(v_lo + (v_hi - v_lo) * (pos - lo))


def aggregate_stats(per_episode: Sequence[Stats]) -> Stats:
    """Pool episode stats: exact min/max/mean/std; quantiles as count-weighted means (as LeRobot)."""
    counts = np.array([int(s["count"][0]) for s in per_episode], dtype=np.float64)
    weights = counts / counts.sum()
    shape = (-1,) + (1,) * (per_episode[0]["mean"].ndim)
    w = weights.reshape(shape)
    means = np.stack([s["mean"] for s in per_episode])
    mean = (w * means).sum(axis=0)
    variances = np.stack([s["std"] ** 2 for s in per_episode])
    var = (w * (variances + (means - mean) ** 2)).sum(axis=0)
    out: Stats = {
        "min": np.min(np.stack([s["min"] for s in per_episode]), axis=0),
        "max": np.max(np.stack([s["max"] for s in per_episode]), axis=0),
        "mean": mean,
        "std": np.sqrt(var),
        "count": np.array([int(counts.sum())], dtype=np.int64),
    }
    for name in QUANTILES:
        out[name] = (w * np.stack([s[name] for s in per_episode])).sum(axis=0)
    return out


def stats_to_lists(stats: Stats) -> dict[str, list[Any]]:
    """JSON/Arrow-ready nested lists, in LeRobot's key order."""
    order = ("min", "max", "mean", "std", "count", *QUANTILES)
    return {k: stats[k].tolist() for k in order if k in stats}
