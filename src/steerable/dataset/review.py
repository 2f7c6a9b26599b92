"""A person's review of a dataset's language: corrected rows saved as revisions, and a status per episode.

What a person did is kept in the provenance file (`meta/steerable_provenance.json`, beside "producers"):
the `human` marks per style and the `review` status per episode (`steerable.dataset.review_records`).
A later `steerable annotate` leaves `protected_episodes` alone unless told otherwise; when it is told
to redo them, its rows are a model's or a heuristic's again: `without_person` takes the person's marks
of what it rewrote off the block (`steerable.dataset.provenance` reads and writes it).

`save_episode` is the one write path of the viewer's editor: the rows are checked by the validator
`annotate` uses, written through the folder commit (a kill mid-save leaves the old or the new
dataset), and recorded as a revision (`steerable.dataset.revisions`); `restore_revision` goes back.
info.json and the provenance file are each written once per save, through the writer's metadata step.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from steerable.dataset.commit import commit_folder
from steerable.dataset.episode_language import EpisodeRows, episode_rows, rows_in_file
from steerable.dataset.info import load_info
from steerable.dataset.info_update import update_info
from steerable.dataset.layout import INFO_PATH, PROVENANCE_PATH
from steerable.dataset.lerobot import LeRobotDataset
from steerable.dataset.provenance import TOOL_CALL_STYLE, ProvenanceBlock, provenance_block
from steerable.dataset.review_records import (
    HUMAN,
    REVIEW_STATUSES,
    REVIEWED,
    UNREVIEWED,
    ReviewStatus,
    block_human,
    block_review,
    checked_review_status,
    with_records,
    with_review,
    without_person,
)
from steerable.dataset.revisions import Revision, file_at, read_revision, record_revision, revision_files
from steerable.dataset.writer import EpisodeLanguage, write_language
from steerable.language import raise_for_problems, validate_rows
from steerable.language.rows import EventRow, PersistentRow, RowIn, checked_event_row, checked_persistent_row
from steerable.language.schema import EVENT_ROW_FIELDS, PERSISTENT_ROW_FIELDS

__all__ = [
    "HUMAN",
    "REVIEW_STATUSES",
    "TOOL_CALL_STYLE",
    "EpisodeRows",
    "RowIn",
    "block_human",
    "block_review",
    "episode_rows",
    "human_edits",
    "changed_styles",
    "protected_episodes",
    "restore_revision",
    "revision_changes",
    "review_status",
    "rows_fingerprint",
    "rows_to_save",
    "save_episode",
    "with_records",
    "with_review",
    "without_person",
]

logger = logging.getLogger(__name__)


def _block(ds: LeRobotDataset) -> ProvenanceBlock:
    return provenance_block(ds.root, ds.info) or ProvenanceBlock()


def human_edits(ds: LeRobotDataset) -> dict[str, list[int]]:
    """style -> the episodes whose rows of that style a person edited."""
    return block_human(_block(ds))


def review_status(ds: LeRobotDataset) -> dict[int, ReviewStatus]:
    """episode -> its review status (the episodes not listed are UNREVIEWED)."""
    return block_review(_block(ds))


def protected_episodes(ds: LeRobotDataset) -> set[int]:
    """Episodes a later `annotate` keeps as they are: marked reviewed, or holding rows a person edited."""
    edited = {e for eps in human_edits(ds).values() for e in eps}
    return edited | {e for e, s in review_status(ds).items() if s == REVIEWED}


def _style_key(row: Mapping[str, object]) -> str:
    return str(row.get("style") or TOOL_CALL_STYLE)


def _canonical(row: Mapping[str, object], t: float | None = None) -> str:
    """One row as comparable text: its schema fields only (absent = None), times as stored (float32)."""
    fields = EVENT_ROW_FIELDS if t is not None else PERSISTENT_ROW_FIELDS
    body = {name: row.get(name) for name in fields}
    if t is not None:
        body["__t"] = float(np.float32(t))
    stamp = body.get("timestamp")
    if isinstance(stamp, (int, float)):
        body["timestamp"] = float(np.float32(stamp))
    return json.dumps(body, sort_keys=True, ensure_ascii=False, default=str)


def _by_style(
    persistent: Iterable[Mapping[str, object]], events: Iterable[tuple[float, Mapping[str, object]]]
) -> dict[str, Counter[str]]:
    out: dict[str, Counter[str]] = {}
    for row in persistent:
        out.setdefault(_style_key(row), Counter())[_canonical(row)] += 1
    for t, row in events:
        out.setdefault(_style_key(row), Counter())[_canonical(row, t)] += 1
    return out


def changed_styles(
    old: EpisodeRows, persistent: Sequence[PersistentRow], events: Sequence[tuple[float, EventRow]]
) -> list[str]:
    """The styles whose rows differ between the stored episode and the given rows."""
    a, b = _by_style(old.persistent, old.events), _by_style(persistent, events)
    return sorted(s for s in set(a) | set(b) if a.get(s, Counter()) != b.get(s, Counter()))


def rows_fingerprint(
    persistent: Iterable[Mapping[str, object]], events: Iterable[tuple[float, Mapping[str, object]]]
) -> str:
    """A short digest of an episode's language, to tell a save whether the rows changed since they were read."""
    import hashlib

    parts = sorted(_canonical(r) for r in persistent) + sorted(_canonical(r, t) for t, r in events)
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def rows_to_save(
    ds: LeRobotDataset,
    episode_index: int,
    persistent: Sequence[RowIn] | None,
    events: Sequence[tuple[float, RowIn]] | None,
    *,
    stored: EpisodeRows | None = None,
) -> EpisodeRows:
    """The rows a save of `persistent` and `events` writes: a column not sent (None) keeps its stored rows.

    The rows are checked by the validator `annotate` uses (times on this episode's frames, cameras of the
    dataset): LanguageSchemaError naming every problem, one line each. Checked, they are typed rows with
    every field of their column (an absent one None), which is how the writer stores them. `stored`:
    the episode's rows, when the caller has read them already.
    """
    old = episode_rows(ds, episode_index) if stored is None else stored
    persistent_in: Sequence[RowIn] = old.persistent if persistent is None else persistent
    events_in: Sequence[tuple[float, RowIn]] = old.events if events is None else events
    problems = validate_rows(persistent_in, events_in, frame_timestamps=old.timestamps, cameras=ds.info.camera_keys)
    raise_for_problems(problems)
    return EpisodeRows(
        [checked_persistent_row(r) for r in persistent_in],
        [(float(t), checked_event_row(r)) for t, r in events_in],
        old.timestamps,
    )


def save_episode(
    ds: LeRobotDataset,
    episode_index: int,
    persistent: Sequence[RowIn] | None,
    events: Sequence[tuple[float, RowIn]] | None,
    *,
    status: ReviewStatus | None = None,
    ops: Mapping[str, int] | None = None,
    by: str = "steerable view --edit",
    message: str = "",
    durable: bool = True,
) -> Revision | None:
    """Store one episode's corrected language (None: its rows stay) and review status as a new revision.

    The rows (as a client sent them, or typed rows) replace the episode's whole language, a column
    given as None keeping its stored rows: `rows_to_save` fills and checks them (LanguageSchemaError
    naming every problem, nothing written). Styles whose rows changed are marked edited by a person.
    Returns the revision, or None when nothing differs from what is stored.
    """
    ep = ds.episode(episode_index)
    if status is not None:  # the library's boundary: a caller without the type checker
        status = checked_review_status(status)
    old = episode_rows(ds, ep.episode_index)
    styles: list[str] = []
    rows: EpisodeRows | None = None
    if persistent is not None or events is not None:
        rows = rows_to_save(ds, ep.episode_index, persistent, events, stored=old)
        styles = changed_styles(old, rows.persistent, rows.events)
    current = review_status(ds).get(ep.episode_index, UNREVIEWED)
    new_status = status if status is not None and status != current else None
    if not styles and new_status is None:
        return None

    def record(block: ProvenanceBlock) -> ProvenanceBlock:
        return with_review(block, ep.episode_index, styles, new_status)

    with commit_folder(ds.root, base=ds.root, durable=durable) as tx:  # aborted on any error, then raised
        files = {INFO_PATH, PROVENANCE_PATH}
        if styles:
            assert rows is not None
            language = {ep.episode_index: EpisodeLanguage(rows.persistent, rows.events)}
            report = write_language(ds, language, into=tx, record=record, checked=True)  # by rows_to_save
            files |= {p.relative_to(ds.root).as_posix() for p in report.shards}
        else:  # a status only: the writer's metadata step, without the language
            update_info(ds, tx, None, record, rows=False)
        revision = record_revision(
            tx, files, by=by, message=message, episodes=[ep.episode_index], styles={ep.episode_index: styles},
            ops=ops, status={ep.episode_index: new_status} if new_status else None,
        )
    ds.info = load_info(ds.root)
    logger.info("saved episode %d as revision %d (styles %s)", ep.episode_index, revision.id, styles)
    return revision


def restore_revision(
    ds: LeRobotDataset, rev: int, *, by: str = "steerable revisions", durable: bool = True
) -> Revision | None:
    """Put every file a revision changed back to its bytes at revision `rev` (0: before the first), as a
    new revision; None when the dataset already is that way."""
    import filecmp
    import shutil

    if rev:
        read_revision(ds.root, rev)
    wanted = {rel: file_at(ds.root, rev, rel) for rel in revision_files(ds.root)}
    differ = {
        rel: src for rel, src in wanted.items()
        if (src is None) != (not (ds.root / rel).is_file())
        or (src is not None and not filecmp.cmp(src, ds.root / rel, shallow=False))
    }
    if not differ:
        return None
    with commit_folder(ds.root, base=ds.root, durable=durable) as tx:
        for rel, src in differ.items():
            if src is None:
                tx.remove(rel)
            else:
                shutil.copyfile(src, tx.file(rel))  # a copy: a tool rewriting the live file leaves the snapshot be
        episodes = sorted({e for r in _revisions_touching(ds, differ) for e in r.episodes})
        revision = record_revision(
            tx, [rel for rel, src in differ.items() if src is not None], by=by, episodes=episodes,
            message=f"back to revision {rev}", restored_from=rev,
        )
    ds.info = load_info(ds.root)
    return revision


def _revisions_touching(ds: LeRobotDataset, files: Iterable[str]) -> list[Revision]:
    from steerable.dataset.revisions import list_revisions

    wanted = set(files)
    return [r for r in list_revisions(ds.root) if wanted & set(r.files)]


def _describe(row: Mapping[str, Any], t: float | None) -> str:
    when = float(np.float32(row["timestamp"] if t is None else t))
    text = row.get("content")
    if text is None:
        calls = row.get("tool_calls") or []
        text = json.dumps(calls[0], ensure_ascii=False) if calls else ""
    camera = f" @{row['camera']}" if row.get("camera") else ""
    return f"{when:.3f}s {row.get('role')}{camera}: {text}"


def revision_changes(root: Path | str, rev: int) -> list[dict[str, Any]]:
    """What revision `rev` changed, per episode and style: the rows it removed and the rows it added."""
    from steerable.dataset.revisions import snapshot_path

    root = Path(root)
    record = read_revision(root, rev)
    shards = [rel for rel in record.files if rel.endswith(".parquet") and rel.startswith("data/")]
    out = []
    for ep in record.episodes:
        for rel in shards:
            before, after = snapshot_path(root, rev, "before", rel), snapshot_path(root, rev, "after", rel)
            if not (before.is_file() and after.is_file()):
                continue
            old, new = rows_in_file(before, ep), rows_in_file(after, ep)
            if not (old.persistent or old.events or new.persistent or new.events):
                continue
            a, b = _by_style(old.persistent, old.events), _by_style(new.persistent, new.events)
            for style in sorted(set(a) | set(b)):
                old_rows, new_rows = a.get(style, Counter()), b.get(style, Counter())
                gone, came = old_rows - new_rows, new_rows - old_rows
                if not gone and not came:
                    continue
                out.append({
                    "episode_index": ep,
                    "style": style,
                    "removed": [_describe_canonical(c) for c in sorted(gone.elements())],
                    "added": [_describe_canonical(c) for c in sorted(came.elements())],
                })
    return out


def _describe_canonical(text: str) -> str:
    body = json.loads(text)
    t = body.pop("__t", None)
    return _describe(body, t)
