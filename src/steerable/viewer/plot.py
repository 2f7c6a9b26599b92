"""The state/action plot data of one episode: the series, which dims are grippers, and keystates.

Gripper dims and keystates come from the motion library (`steerable.motion`: the same rules that
wrote the motion rows, with the `--motion.*` defaults); motion rows naming a gripper action stand in
for the keystates when it finds none.

Each dim is drawn on its dataset-wide range (`meta/stats.json` min/max; the episode's own range
when the stats lack it), so a joint that barely moves is not stretched to full height. A dim is
marked flat (drawn as a level line) when it moves less than `FLAT_FRACTION` of that range in the
episode, or when its whole range is under `FLAT_FRACTION` of the widest among the feature's dims of
the same quantity (names ending alike, e.g. `*.pos`: one unit) — an arm that only jitters by an
encoder tick while the other one works.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from steerable.dataset import EpisodeMeta, LeRobotDataset
from steerable.dataset.frames import feature_matrix, vector_names
from steerable.errors import SteerableError
from steerable.language.rows import PersistentRow
from steerable.motion import MotionParams, detect_keystates, find_dims

__all__ = ["FLAT_FRACTION", "MAX_POINTS", "dim_ranges", "flat_dims", "plot_data", "vector_features"]

logger = logging.getLogger(__name__)

# Longer episodes are decimated to this many samples per dim: enough for a plot a screen wide.
MAX_POINTS = 1000
_PREFERRED = ("observation.state", "state", "action", "actions")
_FLOATS = {"float16", "float32", "float64"}
FLAT_FRACTION = 0.01


def vector_features(ds: LeRobotDataset) -> list[str]:
    """State/action-like float features to plot: the usual names first, at most two."""
    found = [k for k, f in ds.features.items() if f.get("dtype") in _FLOATS and k != "timestamp"]
    ordered = [k for k in _PREFERRED if k in found] + [k for k in found if k not in _PREFERRED]
    return ordered[:2]


def dim_ranges(values: np.ndarray, stats: Mapping[str, Any] | None) -> np.ndarray:
    """(dims, 2) low/high per dim of a (frames, dims) matrix: the dataset's (stats min/max) where known.

    The episode's own values widen it (stale stats); a dim with no finite value gets NaN.
    """
    low, high = _extremes(values)
    width = values.shape[1]
    for key, pick, out in (("min", np.fmin, low), ("max", np.fmax, high)):
        try:
            known = np.asarray((stats or {}).get(key), dtype=np.float64).reshape(-1)
        except (TypeError, ValueError):
            continue
        if known.shape == (width,):
            out[:] = pick(out, np.where(np.isfinite(known), known, np.nan))
    return np.stack([low, high], axis=1)


def flat_dims(values: np.ndarray, ranges: np.ndarray, names: list[str]) -> list[int]:
    """The dims to draw as a level line (see the module docstring)."""
    low, high = _extremes(values)
    span = high - low
    width = ranges[:, 1] - ranges[:, 0]
    quantity = [n.rsplit(".", 1)[1] if "." in n else "" for n in names]
    widest: dict[str, float] = {}
    for q, w in zip(quantity, width, strict=True):
        if np.isfinite(w):
            widest[q] = max(widest.get(q, 0.0), float(w))
    out = []
    for d, (q, w, moved) in enumerate(zip(quantity, width, span, strict=True)):
        idle = not (np.isfinite(w) and np.isfinite(moved)) or w <= 0 or moved <= FLAT_FRACTION * w
        dwarfed = quantity.count(q) > 1 and w <= FLAT_FRACTION * widest.get(q, 0.0)  # next to its siblings
        if idle or dwarfed:
            out.append(d)
    return out


def _extremes(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-column nan-min and nan-max; NaN for a column with no finite value."""
    finite = np.where(np.isfinite(values), values, np.nan)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an all-NaN dim: NaN is the answer
        return np.nanmin(finite, axis=0), np.nanmax(finite, axis=0)


def _number(v: float) -> float | None:
    return None if not np.isfinite(v) else round(float(v), 5)


def _keystates_from_rows(persistent: Iterable[PersistentRow]) -> list[dict[str, Any]]:
    out = []
    for row in persistent:
        text = str(row.get("content") or "")
        if row.get("style") == "motion" and "gripper" in text:
            kind = "gripper_close" if "close" in text else "gripper_open" if "open" in text else "gripper"
            out.append({"t": float(row.get("timestamp") or 0.0), "kind": kind, "source": "motion rows"})
    return out


def plot_data(
    ds: LeRobotDataset, ep: EpisodeMeta, timestamps: np.ndarray, persistent: Iterable[PersistentRow]
) -> dict[str, Any]:
    """Series per feature ({key, names, gripper dims, values per dim}) and keystates, JSON-ready."""
    keys = vector_features(ds)
    table = ds.read_episode(ep.episode_index, keys) if keys else None
    stride = max(1, -(-len(timestamps) // MAX_POINTS))
    grippers: set[str] = set()
    keystates: list[dict[str, Any]] = []
    stats = ds.stats
    if table is not None:
        try:
            params = MotionParams()
            dims = find_dims(ds.features, params, stats)
            if dims.state_key is not None:
                state = feature_matrix(ds.read_episode(ep.episode_index, [dims.state_key]), dims.state_key)
                names = vector_names(ds.features[dims.state_key], state.shape[1])
                grippers = {names[i] for g in dims.grippers for i in g.dims}
                for k in detect_keystates(timestamps, state.astype(np.float64), dims, params):
                    keystates.append({"t": float(k.time), "kind": str(k.kind), "source": k.source})
        except (SteerableError, ValueError, KeyError, IndexError) as exc:
            logger.warning("episode %d: no keystates (%s)", ep.episode_index, exc)
    if not keystates:
        keystates = _keystates_from_rows(persistent)
    series = []
    for key in keys:
        assert table is not None
        full = feature_matrix(table, key).astype(np.float64)
        names = vector_names(ds.features[key], full.shape[1])
        ranges = dim_ranges(full, stats.get(key))
        values = np.where(np.isfinite(full), full, np.nan)[::stride]
        series.append(
            {
                "key": key,
                "names": names,
                # The action vector usually repeats the state names: its gripper dim is marked too.
                "gripper": [i for i, n in enumerate(names) if n in grippers],
                "values": [[_number(v) for v in col] for col in values.T],
                "range": [[_number(lo), _number(hi)] for lo, hi in ranges],
                "flat": flat_dims(full, ranges, names),
            }
        )
    return {
        "t": [round(float(t), 4) for t in timestamps[::stride]],
        "series": series,
        "keystates": keystates,
    }
