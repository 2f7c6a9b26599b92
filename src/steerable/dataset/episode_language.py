"""One episode's stored language, read from a shard into typed rows: the one reader of it.

The review save (`steerable.dataset.review`), a revision's diff (a snapshot shard), the writer's kept
rows (`steerable.dataset.writer`) and the viewer's page (`steerable.viewer.episodes`, which shapes it for
the page) all read an episode's language here. The persistent rows are the first frame's cell (every
frame holds the same list); each event row is paired with its frame's stored float32 timestamp.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa

from steerable.dataset.lerobot import LeRobotDataset
from steerable.dataset.parquet import file_metadata, read_parquet
from steerable.language.rows import EventRow, PersistentRow, event_rows_from_arrow, persistent_rows_from_arrow
from steerable.language.styles import LANGUAGE_EVENTS, LANGUAGE_PERSISTENT

__all__ = ["EpisodeRows", "episode_rows", "rows_in_file", "rows_of_table"]


@dataclass(frozen=True)
class EpisodeRows:
    """One episode's stored language: persistent rows, (time, row) events, and the frame timestamps.

    `event_frames`: for each event, the frame (row of the episode) it is stored on, when it was read
    from a shard (empty for rows built in memory).
    """

    persistent: list[PersistentRow]
    events: list[tuple[float, EventRow]]
    timestamps: np.ndarray
    event_frames: list[int] = field(default_factory=list)


def rows_of_table(table: pa.Table, timestamps: np.ndarray) -> EpisodeRows:
    """The language of one episode's frame rows `table` (either language column may be absent), whose
    stored timestamps are `timestamps`."""
    stamps = timestamps.astype(np.float32, copy=False)
    names = table.column_names
    persistent: list[PersistentRow] = []
    if LANGUAGE_PERSISTENT in names and table.num_rows:
        persistent = persistent_rows_from_arrow(table.column(LANGUAGE_PERSISTENT).slice(0, 1))[0]
    events: list[tuple[float, EventRow]] = []
    frames: list[int] = []
    if LANGUAGE_EVENTS in names:
        cells = event_rows_from_arrow(table.column(LANGUAGE_EVENTS))
        for frame, (t, rows) in enumerate(zip(stamps.tolist(), cells, strict=True)):
            events.extend((float(t), r) for r in rows)
            frames.extend(frame for _ in rows)
    return EpisodeRows(persistent, events, stamps, frames)


def episode_rows(ds: LeRobotDataset, episode_index: int) -> EpisodeRows:
    """Episode `episode_index`'s language as `ds` stores it."""
    columns = ["timestamp"] + [c for c in (LANGUAGE_PERSISTENT, LANGUAGE_EVENTS) if c in ds.features]
    table = ds.read_episode(episode_index, columns)
    return rows_of_table(table, table.column("timestamp").to_numpy())


def rows_in_file(path: Path, episode_index: int) -> EpisodeRows:
    """Episode `episode_index`'s language in the shard file `path` (a revision's snapshot, say)."""
    import pyarrow.compute as pc

    names = file_metadata(path).schema.to_arrow_schema().names
    columns = ["episode_index", "timestamp"] + [c for c in (LANGUAGE_PERSISTENT, LANGUAGE_EVENTS) if c in names]
    table = read_parquet(path, columns)
    table = table.filter(pc.equal(table.column("episode_index"), episode_index))
    return rows_of_table(table, table.column("timestamp").to_numpy())
