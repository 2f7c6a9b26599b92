"""The info.json and provenance-file half of a language write (`steerable.dataset.writer`).

A write declares the language columns and the `say` tool in info.json, forgets legacy columns no
shard has any more, and records who produced each style (per episode too) in
`meta/steerable_provenance.json`, taking a person's review marks off the rows those producers
rewrote. Both files go into the write's folder commit.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from steerable.dataset.atomic import remove_stale_temps
from steerable.dataset.commit import FolderCommit
from steerable.dataset.info import DatasetInfo, load_info, write_info_file
from steerable.dataset.layout import INFO_PATH, PROVENANCE_PATH
from steerable.dataset.lerobot import LeRobotDataset
from steerable.dataset.parquet import file_metadata
from steerable.dataset.provenance import (
    ProvenanceBlock,
    provenance_block,
    with_episode_producers,
    write_provenance_file,
)
from steerable.dataset.review_records import without_person
from steerable.errors import CorruptDatasetError
from steerable.language import SAY_TOOL, language_feature_info, merge_tools

__all__ = ["LEGACY_COLUMNS", "BlockEdit", "WriteProvenance", "readable_columns", "update_info"]

# Columns of older LeRobot versions that the language columns replace.
LEGACY_COLUMNS = ("subtask_index", "tools")

# A further edit of the provenance block, written in the same commit (a review save's records).
BlockEdit = Callable[[ProvenanceBlock], ProvenanceBlock]


@dataclass(frozen=True)
class WriteProvenance:
    """What a write records of who wrote its rows (see `steerable.dataset.writer.write_language`)."""

    producers: dict[str, str]
    by_episode: dict[int, dict[str, str]]
    rewritten: dict[int, frozenset[str | None] | None]  # episode -> the styles replaced (None: all)


def readable_columns(path: Path) -> list[str] | None:
    """The columns of a shard no update touches, or None when it cannot be read: such a shard is
    left as it was (its episodes failed before the write), not a reason to write nothing at all."""
    try:
        return list(file_metadata(path).schema.to_arrow_schema().names)
    except CorruptDatasetError:
        return None


def update_info(
    ds: LeRobotDataset,
    tx: FolderCommit,
    provenance: WriteProvenance | None,
    record: BlockEdit | None = None,
    *,
    rows: bool = True,
) -> None:
    """Declare the language columns and the `say` tool; forget legacy columns no shard has any more;
    record who produced each style, per episode too, in the provenance file, and take a person's
    review marks off the rows those producers rewrote; then `record` (a review save's marks). An older
    steerable's provenance key leaves info.json (LeRobot warns about it on every load) for the file.
    info.json and the provenance file are each written once. `rows` False: the commit rewrote no
    shard (a review status saved alone), so the features and tools stay as they are."""
    info = load_info(ds.root)
    edited = info.without_legacy_provenance()
    if rows:
        edited.features = _features(ds, tx, info)
        edited.tools = merge_tools(info.tools, [SAY_TOOL])
    block = provenance_block(ds.root, info)
    if provenance is not None:
        block = block or ProvenanceBlock()
        known = block.get("producers")
        merged = {**(known if isinstance(known, dict) else {}), **provenance.producers}
        block = without_person(block, provenance.rewritten)
        block = with_episode_producers(block, provenance.by_episode, provenance.rewritten)
        block["producers"] = dict(sorted(merged.items()))  # a copy of its own (with_episode_producers')
    if record is not None:
        block = record(block or ProvenanceBlock())
    keep = provenance is not None or record is not None or info.has_legacy_provenance
    _write_metadata(tx, edited, block if keep else None)


def _features(ds: LeRobotDataset, tx: FolderCommit, info: DatasetInfo) -> dict[str, dict[str, Any]]:
    """info.json's features once the shards hold the language columns: legacy columns no shard has
    any more are forgotten (kept while an unreadable shard may still hold one)."""
    features = {**info.features, **language_feature_info()}
    shards = [readable_columns(tx.root / p.relative_to(ds.root)) for p in ds.data_files()]
    remaining = {name for names in shards for name in names or ()}
    for name in LEGACY_COLUMNS:
        if name in features and name not in remaining and None not in shards:
            del features[name]
    return features


def _write_metadata(tx: FolderCommit, info: DatasetInfo, block: ProvenanceBlock | None) -> None:
    """Write info.json and, unless `block` is None, the provenance file into the transaction `tx`
    (the commit makes them durable)."""
    if block is not None:
        sidecar = tx.file(PROVENANCE_PATH)
        remove_stale_temps(sidecar)
        write_provenance_file(sidecar, block, durable=False)
    path = tx.file(INFO_PATH)
    remove_stale_temps(path)
    write_info_file(path, info, durable=False)
