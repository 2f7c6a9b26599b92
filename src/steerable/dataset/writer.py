"""Write language rows into a dataset's data shards: validated first, then committed all at once.

Every rewritten shard gets both language columns in the canonical Arrow types, one row group per
episode, and every other column, type, order and schema metadata as it was (a legacy
`subtask_index` / `tools` column is dropped). Episodes not in the update keep their rows; an updated
episode keeps its stored rows of every style its update does not replace (`EpisodeLanguage.replaces`).
A shard is rewritten when it holds an updated episode, or when it lacks the language columns: info.json
declares them for the whole dataset, and LeRobot's loader needs every shard to match it. A shard
that is not readable parquet and holds no updated episode is left as it was.

The rewritten shards and info.json form one new version of the dataset folder, switched in at once
by `steerable.dataset.commit` (untouched files, videos included, are hard links): a reader sees the
whole dataset old or new, whenever the writer dies.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from steerable.dataset.atomic import remove_stale_temps
from steerable.dataset.commit import FolderCommit, commit_folder
from steerable.dataset.episode_language import rows_of_table
from steerable.dataset.info import load_info
from steerable.dataset.info_update import (
    LEGACY_COLUMNS,
    BlockEdit,
    WriteProvenance,
    readable_columns,
    update_info,
)
from steerable.dataset.lerobot import LeRobotDataset
from steerable.dataset.parquet import file_metadata, read_parquet
from steerable.dataset.provenance import TOOL_CALL_STYLE
from steerable.errors import CorruptDatasetError, WriteError
from steerable.language import (
    LANGUAGE_COLUMNS,
    LANGUAGE_EVENTS,
    LANGUAGE_PERSISTENT,
    EventRow,
    PersistentRow,
    Problem,
    events_array,
    events_column_type,
    language_hf_features,
    persistent_array,
    persistent_column_type,
    raise_for_problems,
    rows_from_arrow,
    sort_events,
    sort_persistent,
    to_float32,
    validate_rows,
)
from steerable.language.rows import RowIn

__all__ = ["EpisodeLanguage", "WriteReport", "write_language"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class EpisodeLanguage:
    """One episode's language: persistent rows, and events as (emission time, row) pairs.

    Typed rows with every field of their column (`steerable.language.persistent_row` / `event_row`, or
    `checked_*_row` of rows a client sent); `write_language` checks their values before it writes anything.

    `replaces`: None, these rows are the episode's whole language; otherwise they replace only the
    stored rows of these styles (None stands for tool-call rows such as `say`) and the rest is kept.
    """

    persistent: Sequence[PersistentRow] = field(default_factory=list)
    events: Sequence[tuple[float, EventRow]] = field(default_factory=list)
    replaces: frozenset[str | None] | None = None


@dataclass(frozen=True)
class WriteReport:
    """What a write changed: shard files rewritten, episodes written, language rows, frame rows."""

    shards: tuple[Path, ...]
    episodes: tuple[int, ...]
    rows: int
    frames: int


@dataclass(frozen=True)
class _Shard:
    path: Path
    timestamps: np.ndarray  # the stored float32 `timestamp` of every row
    runs: list[tuple[int, int, int]]  # (episode_index, first row, end row), in file order

    def run_of(self, episode_index: int) -> tuple[int, int]:
        for ep, start, stop in self.runs:
            if ep == episode_index:
                return start, stop
        raise CorruptDatasetError(
            f"{self.path} holds no rows of episode {episode_index}, though the episode metadata points "
            "there; the dataset is inconsistent"
        )


def write_language(
    ds: LeRobotDataset,
    updates: Mapping[int, EpisodeLanguage],
    *,
    into: FolderCommit | None = None,
    producers: Mapping[str, str] | None = None,
    episode_producers: Mapping[int, Mapping[str, str]] | None = None,
    record: BlockEdit | None = None,
    checked: bool = False,
) -> WriteReport:
    """Store `updates` (episode index -> its language) in `ds`; nothing is written unless all are valid.

    Event rows land on the frame whose stored float32 timestamp equals their emission time exactly.
    Writing the same updates twice gives byte-identical files. By default `ds` is updated in place
    (one folder commit; `ds.info` is reloaded afterwards); `into` instead writes the changed files
    into a transaction the caller opened with `ds.root` as its base, and commits. `producers`
    (style -> model id or `heuristic:<module>`) is recorded in `meta/steerable_provenance.json`
    (`steerable.dataset.provenance`), per episode too: `episode_producers` (episode -> style ->
    producer) where the writers of one style differ between episodes, else each updated episode's
    styles get their `producers` entry. The rows it wrote are then no longer a person's: their review
    marks go (`review_records.without_person`); `record` then edits the provenance block further, in
    the same single write of each file (a review save's marks). An update whose `replaces` is set keeps
    the episode's stored rows of every other style. An older steerable's provenance key in info.json
    moves to the file. `checked`: the caller has run `validate_rows` on these very rows, against their
    episode's frames and the dataset's cameras, and every update is whole (`replaces` None), as the
    review save's `rows_to_save` does; the rows are not checked a second time.
    """
    updates = {int(ep): lang for ep, lang in updates.items()}
    rewritten = {ep: lang.replaces for ep, lang in updates.items()}
    if producers and episode_producers is None:  # the styles of the new rows, before kept rows join them
        episode_producers = {ep: _styles_of(lang, producers) for ep, lang in updates.items()}
    shards = _plan(ds, updates)
    updates = _with_kept_rows(ds, shards, updates)
    if not checked or any(lang.replaces is not None for lang in updates.values()):  # kept rows join unchecked
        _validate(ds, shards, updates)
    known = episode_producers or {}
    by_episode = {ep: dict(known[ep]) for ep in updates if ep in known}
    provenance = WriteProvenance(dict(producers or {}), by_episode, rewritten) if producers else None
    if into is not None:
        return _write(ds, shards, updates, into, provenance, record)
    with commit_folder(ds.root, base=ds.root) as tx:
        report = _write(ds, shards, updates, tx, provenance, record)
    ds.info = load_info(ds.root)
    return report


def _styles_of(lang: EpisodeLanguage, producers: Mapping[str, str]) -> dict[str, str]:
    """style -> producer, for the styles of `producers` this episode's new rows hold."""
    rows = [*lang.persistent, *(row for _, row in lang.events)]
    styles = {str(row.get("style") or TOOL_CALL_STYLE) for row in rows}
    return {style: producers[style] for style in sorted(styles) if style in producers}


def _write(
    ds: LeRobotDataset,
    shards: Sequence[_Shard],
    updates: Mapping[int, EpisodeLanguage],
    tx: FolderCommit,
    provenance: WriteProvenance | None,
    record: BlockEdit | None,
) -> WriteReport:
    frames = 0
    written = []
    for shard in shards:
        rel = shard.path.relative_to(ds.root)
        frames += _rewrite(shard, updates, tx.file(rel))
        written.append(tx.dest / rel)
        logger.info("rewrote %s (%d frames)", rel, len(shard.timestamps))
    update_info(ds, tx, provenance, record)
    rows = sum(len(lang.persistent) + len(lang.events) for lang in updates.values())
    return WriteReport(tuple(written), tuple(sorted(updates)), rows, frames)


# -- planning and validation (reads only) ---------------------------------------------------------


def _plan(ds: LeRobotDataset, updates: Mapping[int, EpisodeLanguage]) -> list[_Shard]:
    targets = {ds.data_path(ds.episode(ep)) for ep in updates}
    for path in ds.data_files():
        if path in targets:
            continue
        names = readable_columns(path)
        if names is None:
            logger.warning("%s is not a readable parquet file: left as it was", path)
        elif not all(column in names for column in LANGUAGE_COLUMNS):
            targets.add(path)
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:  # parquet reads drop the GIL
        return list(pool.map(_read_shard, sorted(targets)))


def _read_shard(path: Path) -> _Shard:
    table = read_parquet(path, ["episode_index", "timestamp"])
    episodes = table.column("episode_index").to_numpy()
    timestamps = table.column("timestamp").to_numpy().astype(np.float32, copy=False)
    starts = [0, *(np.flatnonzero(np.diff(episodes)) + 1).tolist()] if len(episodes) else []
    ends = [*starts[1:], len(episodes)]
    runs = [(int(episodes[a]), a, b) for a, b in zip(starts, ends, strict=True)]
    seen = [ep for ep, _, _ in runs]
    if len(set(seen)) != len(seen):
        raise CorruptDatasetError(
            f"{path} has the rows of an episode in more than one place; steerable writes shards "
            "whose episodes are contiguous (as LeRobot records them)"
        )
    return _Shard(path, timestamps, runs)


def _with_kept_rows(
    ds: LeRobotDataset,
    shards: Sequence[_Shard],
    updates: Mapping[int, EpisodeLanguage],
) -> dict[int, EpisodeLanguage]:
    """Each partial update (`replaces` set) plus its episode's stored rows of the styles it keeps."""
    merged = dict(updates)
    by_path = {shard.path: shard for shard in shards}
    partial = [ep for ep, lang in updates.items() if lang.replaces is not None]
    for path in sorted({ds.data_path(ds.episode(ep)) for ep in partial}):
        names = file_metadata(path).schema.to_arrow_schema().names
        if not all(column in names for column in LANGUAGE_COLUMNS):
            continue
        shard = by_path[path]
        table = read_parquet(path, list(LANGUAGE_COLUMNS))
        for ep, start, stop in shard.runs:
            lang = updates.get(ep)
            if lang is None or lang.replaces is None or stop == start:
                continue
            replaced = lang.replaces
            stored = rows_of_table(table.slice(start, stop - start), shard.timestamps[start:stop])
            merged[ep] = EpisodeLanguage(
                persistent=[r for r in stored.persistent if r.get("style") not in replaced] + list(lang.persistent),
                events=[(t, r) for t, r in stored.events if r.get("style") not in replaced] + list(lang.events),
            )  # `replaces` cleared: the merged rows are the episode's whole language
    return merged


def _validate(ds: LeRobotDataset, shards: Sequence[_Shard], updates: Mapping[int, EpisodeLanguage]) -> None:
    by_path = {shard.path: shard for shard in shards}
    problems: list[Problem] = []
    for ep, lang in sorted(updates.items()):
        shard = by_path[ds.data_path(ds.episode(ep))]
        start, stop = shard.run_of(ep)
        found = validate_rows(
            lang.persistent,
            lang.events,
            frame_timestamps=shard.timestamps[start:stop],
            cameras=ds.info.camera_keys,
        )
        problems += [Problem(f"episode {ep} {p.where}", p.message) for p in found]
    raise_for_problems(problems)


# -- rewriting one shard ----------------------------------------------------------------------------


def _rewrite(shard: _Shard, updates: Mapping[int, EpisodeLanguage], dest: Path) -> int:
    """Write the new version of `shard` to `dest` (a fresh path in the new dataset version)."""
    remove_stale_temps(dest)  # left by writers of older steerable versions
    names = file_metadata(shard.path).schema.to_arrow_schema().names
    # Old language cells are decoded only when some episode keeps them.
    keep_old = any(ep not in updates for ep, _, _ in shard.runs)
    table = read_parquet(
        shard.path,
        [n for n in names if n not in LEGACY_COLUMNS and (keep_old or n not in LANGUAGE_COLUMNS)],
    )
    persistent, events = _language_columns(table, shard, updates)
    new = {LANGUAGE_PERSISTENT: persistent, LANGUAGE_EVENTS: events}
    order = [n for n in names if n not in LEGACY_COLUMNS]
    order += [n for n in LANGUAGE_COLUMNS if n not in order]
    fields = [pa.field(n, new[n].type) if n in new else table.schema.field(n) for n in order]
    columns = [new[n] if n in new else table.column(n) for n in order]
    dropped = [n for n in LEGACY_COLUMNS if n in names]
    schema = pa.schema(fields, metadata=_updated_metadata(table.schema.metadata, dropped))
    out = pa.Table.from_arrays(columns, schema=schema)
    try:
        # LeRobot's layout: snappy, dictionary encoding, one row group per episode.
        with pq.ParquetWriter(dest, schema, compression="snappy", use_dictionary=True) as writer:
            for _, start, stop in shard.runs:
                writer.write_table(out.slice(start, stop - start), row_group_size=stop - start)
    except pa.ArrowException as exc:
        raise WriteError(f"could not write {shard.path}: {exc}; the dataset is unchanged") from exc
    return int(out.num_rows)


def _language_columns(
    table: pa.Table, shard: _Shard, updates: Mapping[int, EpisodeLanguage]
) -> tuple[pa.ChunkedArray, pa.ChunkedArray]:
    persistent: list[pa.Array] = []
    events: list[pa.Array] = []
    for ep, start, stop in shard.runs:
        n = stop - start
        lang = updates.get(ep)
        if lang is None:
            persistent.append(_kept(table, LANGUAGE_PERSISTENT, start, n, persistent_array))
            events.append(_kept(table, LANGUAGE_EVENTS, start, n, events_array))
            continue
        # The same sorted list on every frame of the episode.
        cell = persistent_array([sort_persistent(lang.persistent)])
        persistent.append(cell.take(pa.array(np.zeros(n, dtype=np.int64))))
        frame_of: dict[float, int] = {}
        for i, t in enumerate(shard.timestamps[start:stop].tolist()):
            frame_of.setdefault(t, i)
        buckets: dict[int, list[EventRow]] = {}
        for t, row in lang.events:
            buckets.setdefault(frame_of[to_float32(t)], []).append(row)
        cells: list[list[EventRow] | None] = [None] * n  # None: a frame without events, stored as []
        for i, rows in buckets.items():
            cells[i] = sort_events(rows)
        events.append(events_array(cells))
    return (
        pa.chunked_array(persistent, type=persistent_column_type()),
        pa.chunked_array(events, type=events_column_type()),
    )


def _kept(
    table: pa.Table, name: str, start: int, n: int, build: Callable[[Sequence[Sequence[RowIn] | None]], pa.Array]
) -> pa.Array:
    """An untouched episode's current cells of column `name`, in the canonical type ([] when absent)."""
    if name not in table.column_names:
        return build([[] for _ in range(n)])
    cells = table.column(name).slice(start, n)
    canonical = persistent_column_type() if name == LANGUAGE_PERSISTENT else events_column_type()
    if cells.type == canonical:
        return cells.combine_chunks()
    return build(rows_from_arrow(cells))


def _updated_metadata(metadata: dict[bytes, bytes] | None, dropped: list[str]) -> dict[bytes, bytes] | None:
    """Schema metadata with the HF features declaring the language columns and dropped columns removed."""
    if not metadata:
        return metadata
    out = dict(metadata)
    hf = _json_or_none(out.get(b"huggingface"))
    features = hf.get("info", {}).get("features") if isinstance(hf, dict) else None
    if isinstance(hf, dict) and isinstance(features, dict):
        for name in dropped:
            features.pop(name, None)
        features.update(language_hf_features())
        out[b"huggingface"] = json.dumps(hf).encode()
    pandas = _json_or_none(out.get(b"pandas"))
    if dropped and isinstance(pandas, dict) and isinstance(pandas.get("columns"), list):
        pandas["columns"] = [c for c in pandas["columns"] if not (isinstance(c, dict) and c.get("name") in dropped)]
        out[b"pandas"] = json.dumps(pandas).encode()
    return out


def _json_or_none(raw: bytes | None) -> Any:
    if raw is None:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return None  # foreign metadata we cannot parse is kept verbatim

