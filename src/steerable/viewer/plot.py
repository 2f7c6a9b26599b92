"""The state/action plot data of one episode: the series, which dims are grippers, and keystates.

Gripper dims and keystates come from the motion library (`steerable.motion`: the same rules that
wrote the motion rows, with the `--motion.*` defaults); motion rows naming a gripper action stand in
for the keystates when it finds none.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

import numpy as np

from steerable.dataset import EpisodeMeta, LeRobotDataset
from steerable.dataset.frames import feature_matrix, vector_names
from steerable.errors import SteerableError
from steerable.language.rows import Row
from steerable.motion import MotionParams, detect_keystates, find_dims

__all__ = ["MAX_POINTS", "plot_data", "vector_features"]

logger = logging.getLogger(__name__)

# Longer episodes are decimated to this many samples per dim: enough for a plot a screen wide.
MAX_POINTS = 1000
_PREFERRED = ("observation.state", "state", "action", "actions")
_FLOATS = {"float16", "float32", "float64"}


def vector_features(ds: LeRobotDataset) -> list[str]:
    """State/action-like float features to plot: the usual names first, at most two."""
    found = [k for k, f in ds.features.items() if f.get("dtype") in _FLOATS and k != "timestamp"]
    ordered = [k for k in _PREFERRED if k in found] + [k for k in found if k not in _PREFERRED]
    return ordered[:2]


def _keystates_from_rows(persistent: Iterable[Row]) -> list[dict[str, Any]]:
    out = []
    for row in persistent:
        text = str(row.get("content") or "")
        if row.get("style") == "motion" and "gripper" in text:
            kind = "gripper_close" if "close" in text else "gripper_open" if "open" in text else "gripper"
            out.append({"t": float(row.get("timestamp") or 0.0), "kind": kind, "source": "motion rows"})
    return out


def plot_data(
    ds: LeRobotDataset, ep: EpisodeMeta, timestamps: np.ndarray, persistent: Iterable[Row]
) -> dict[str, Any]:
    """Series per feature ({key, names, gripper dims, values per dim}) and keystates, JSON-ready."""
    keys = vector_features(ds)
    table = ds.read_episode(ep.episode_index, keys) if keys else None
    stride = max(1, -(-len(timestamps) // MAX_POINTS))
    grippers: set[str] = set()
    keystates: list[dict[str, Any]] = []
    if table is not None:
        try:
            params = MotionParams()
            dims = find_dims(ds.features, params, ds.stats)
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
        matrix = feature_matrix(table, key).astype(np.float64)[::stride]
        names = vector_names(ds.features[key], matrix.shape[1])
        values = np.where(np.isfinite(matrix), matrix, np.nan)
        series.append(
            {
                "key": key,
                "names": names,
                # The action vector usually repeats the state names: its gripper dim is marked too.
                "gripper": [i for i, n in enumerate(names) if n in grippers],
                "values": [[None if np.isnan(v) else round(float(v), 5) for v in col] for col in values.T],
            }
        )
    return {
        "t": [round(float(t), 4) for t in timestamps[::stride]],
        "series": series,
        "keystates": keystates,
    }
