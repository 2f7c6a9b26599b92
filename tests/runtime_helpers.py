"""Helpers for runtime tests: read a recorded dataset's language back and validate it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from steerable.language import rows_from_arrow, validate_rows


def recorded_language(root: Path, episode: int = 0) -> tuple[list[dict[str, Any]], dict[float, list[dict[str, Any]]], list]:
    """(persistent rows, {timestamp: event rows}, validation problems) of one recorded episode."""
    table = pa.concat_tables(pq.read_table(p) for p in sorted((root / "data").rglob("*.parquet")))
    mask = [e == episode for e in table.column("episode_index").to_pylist()]
    table = table.filter(mask)
    times = table.column("timestamp").to_pylist()
    persistent = rows_from_arrow(table.column("language_persistent"))[0]
    cells = rows_from_arrow(table.column("language_events"))
    events = {t: rows for t, rows in zip(times, cells, strict=True) if rows}
    pairs = [(t, row) for t, rows in events.items() for row in rows]
    problems = validate_rows(persistent, pairs, frame_timestamps=times,
                             cameras=["observation.images.top", "observation.images.wrist"])
    return persistent, events, problems
