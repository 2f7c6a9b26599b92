"""A dataset's vital statistics for `steerable info`: totals, cameras, features, tasks, language."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from steerable.dataset.lerobot import LeRobotDataset
from steerable.dataset.parquet import file_metadata, read_parquet
from steerable.language.styles import LANGUAGE_EVENTS, LANGUAGE_PERSISTENT

__all__ = ["summarize"]


def summarize(ds: LeRobotDataset) -> dict[str, Any]:
    """JSON-ready summary; reads only metadata, the language columns and video headers."""
    return {
        "root": str(ds.root),
        "codebase_version": ds.info.codebase_version,
        "robot_type": ds.info.robot_type,
        "fps": ds.fps,
        "total_episodes": len(ds.episodes),
        "total_frames": ds.total_frames,
        "total_tasks": len(ds.tasks),
        "cameras": _cameras(ds),
        "features": {
            name: {"dtype": f.get("dtype"), "shape": list(f.get("shape") or [])}
            for name, f in ds.features.items()
        },
        "tasks": [ds.tasks[i] for i in sorted(ds.tasks)],
        "episodes": [
            {"episode_index": e.episode_index, "length": e.length, "tasks": e.tasks} for e in ds.episodes
        ],
        "language": _language(ds),
    }


def _cameras(ds: LeRobotDataset) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for key in ds.camera_keys:
        feature = ds.features[key]
        vinfo = feature.get("info") or {}
        shape = list(feature.get("shape") or [])
        entry: dict[str, Any] = {
            "codec": vinfo.get("video.codec"),
            "width": vinfo.get("video.width") or (shape[1] if len(shape) == 3 else None),
            "height": vinfo.get("video.height") or (shape[0] if len(shape) == 3 else None),
            "files_present": None,
        }
        if ds.episodes:
            paths = {ds.video_path(key, ep) for ep in ds.episodes if key in ep.videos}
            entry["files_present"] = sum(p.is_file() for p in paths)
            entry["files_expected"] = len(paths)
        out[key] = entry
    return out


def _language(ds: LeRobotDataset) -> dict[str, Any] | None:
    persistent: Counter[str] = Counter()
    events: Counter[str] = Counter()
    found = False
    for path in ds.data_files():
        names = file_metadata(path).schema.to_arrow_schema().names
        cols = [c for c in ("episode_index", LANGUAGE_PERSISTENT, LANGUAGE_EVENTS) if c in names]
        if len(cols) == 1:
            continue
        found = True
        table = read_parquet(path, cols)
        if LANGUAGE_PERSISTENT in cols:
            # The episode's whole list repeats on every frame: count it once per episode.
            first_rows = _first_row_per_episode(table.column("episode_index"))
            persistent.update(_styles(table.column(LANGUAGE_PERSISTENT).take(first_rows)))
        if LANGUAGE_EVENTS in cols:
            events.update(_styles(table.column(LANGUAGE_EVENTS)))
    if not found and not ds.has_language:
        return None
    return {
        "persistent": dict(sorted(persistent.items())),
        "events": dict(sorted(events.items())),
        "tools": [t.get("function", {}).get("name") for t in ds.tools],
    }


def _first_row_per_episode(episode_index: pa.ChunkedArray) -> pa.Array:
    values = episode_index.to_numpy()
    starts = [0] + [i for i in range(1, len(values)) if values[i] != values[i - 1]]
    return pa.array(starts, pa.int64())


def _styles(column: pa.ChunkedArray | pa.Array) -> Counter[str]:
    """Count rows by style; style-less rows (tool-call atoms) count as 'tool_call'."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    rows = pc.list_flatten(column)
    if len(rows) == 0:
        return Counter()
    styles = pc.fill_null(pc.struct_field(rows, "style"), "tool_call")
    counts = pc.value_counts(styles).to_pylist()
    return Counter({c["values"]: int(c["counts"]) for c in counts})
