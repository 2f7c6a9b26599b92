"""Every save of a person's corrections is a revision: list them, see what one changed, go back to one.

A revision is a record `.steerable/revisions/NNNN.json` inside the dataset (LeRobot ignores our work
folder, Hub pushes skip it: who, when, which episodes and styles, the edit operations counted by the
page) and the files the save replaced, as they were before and after, in one flat folder
(`.steerable/revisions/files/NNNN.before.REL` with REL's slashes encoded, and `NNNN.after.REL`). A
`before` is a hard link to the replaced file (no longer live once the save is in, and the folder commit
writes every changed file fresh, never through a link); an `after` is a copy, because the live file is
one that other tools may rewrite in place (LeRobot's `modify_tasks` rewrites the data shards and
info.json through their inodes), which would change a linked snapshot with it. So a snapshot keeps its
bytes for good, at the cost of one copy of each file a save changes. Flat, so that
a commit (which syncs every folder of the dataset) costs no more after a thousand revisions than after
one. Revision 0 is the dataset before the first revision.

A file's bytes at revision k are the `after` of the last revision up to k that changed it, else the
`before` of the first later revision that changed it, else the file as it is now. Going back to k is
itself a revision (nothing is lost: going back again restores what the going back replaced).
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import re
import shutil
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from steerable.dataset.atomic import atomic_write_json
from steerable.dataset.commit import FolderCommit
from steerable.dataset.layout import WORK_DIR_NAME
from steerable.dataset.review_records import ReviewStatus
from steerable.errors import ConfigError, CorruptDatasetError
from steerable.scratch import ScratchFolder

__all__ = [
    "REVISIONS_DIR",
    "Revision",
    "snapshot_path",
    "checkout",
    "edit_cost",
    "file_at",
    "latest_revision",
    "list_revisions",
    "parse_revision_spec",
    "read_revision",
    "record_revision",
    "revision_files",
]

CHECKOUT_TAG = "steerable-rev-"  # a revision checkout's scratch folder: `.<dataset>.steerable-rev-<pid>-...`

REVISIONS_DIR = f"{WORK_DIR_NAME}/revisions"
_NAME = re.compile(r"(\d{4,})\.json")
_SPEC = re.compile(r"^(?P<root>.+)@r(?P<rev>\d+)$")


@dataclass(frozen=True)
class Revision:
    """One save: `styles` maps each changed episode (as a string) to the styles whose rows changed;
    `ops` counts the edit operations the page made (boundary moves, splits, merges, retypes...);
    `status` the review status set per episode; `restored_from` the revision a going back restored."""

    id: int
    time: str
    by: str
    message: str = ""
    episodes: list[int] = field(default_factory=list)
    styles: dict[str, list[str]] = field(default_factory=dict)
    ops: dict[str, int] = field(default_factory=dict)
    status: dict[str, str] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)
    created: list[str] = field(default_factory=list)  # files the revision added (no `before`)
    restored_from: int | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _dir(root: Path) -> Path:
    return Path(root) / REVISIONS_DIR


def _record_path(root: Path, rev: int) -> Path:
    return _dir(root) / f"{rev:04d}.json"


def snapshot_path(root: Path | str, rev: int, side: str, rel: str) -> Path:
    """Where revision `rev` keeps file `rel` as it was `side` ("before" or "after") the revision
    (relative to the dataset when `root` is "")."""
    return _dir(Path(root)) / "files" / f"{rev:04d}.{side}.{quote(rel, safe='')}"


def list_revisions(root: Path | str) -> list[Revision]:
    """The dataset's revisions, oldest first ([] when it has none)."""
    base = _dir(Path(root))
    if not base.is_dir():
        return []
    ids = sorted(int(m.group(1)) for m in map(_NAME.fullmatch, os.listdir(base)) if m)
    return [read_revision(root, rev) for rev in ids]


def latest_revision(root: Path | str) -> int:
    """The id of the newest revision, 0 when there is none."""
    revisions = list_revisions(root)
    return revisions[-1].id if revisions else 0


def read_revision(root: Path | str, rev: int) -> Revision:
    path = _record_path(Path(root), rev)
    if not path.is_file():
        known = ", ".join(str(r.id) for r in list_revisions(root)) or "none"
        raise ConfigError(f"{root} has no revision {rev} (revisions: {known}; 0 is the dataset before the first)")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return Revision(**data)
    except (OSError, ValueError, TypeError) as exc:
        raise CorruptDatasetError(f"{path} is not a revision record: {exc}") from exc


def revision_files(root: Path | str) -> list[str]:
    """Every file some revision changed (relative paths)."""
    return sorted({rel for r in list_revisions(root) for rel in r.files})


def file_at(root: Path | str, rev: int, rel: str) -> Path | None:
    """Where file `rel` has its bytes of revision `rev` (0: before the first); None: it did not exist then."""
    root = Path(root)
    revisions = list_revisions(root)
    if rev and rev not in {r.id for r in revisions}:
        read_revision(root, rev)  # raises naming the known ones
    changed = [r for r in revisions if rel in r.files]
    upto = [r for r in changed if r.id <= rev]
    if upto:
        return snapshot_path(root, upto[-1].id, "after", rel)
    later = [r for r in changed if r.id > rev]
    if later:
        first = later[0]
        return None if rel in first.created else snapshot_path(root, first.id, "before", rel)
    return root / rel


def _link(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def record_revision(
    tx: FolderCommit,
    files: Iterable[str],
    *,
    by: str,
    message: str = "",
    episodes: Iterable[int] = (),
    styles: Mapping[int, Iterable[str]] | None = None,
    ops: Mapping[str, int] | None = None,
    status: Mapping[int, ReviewStatus] | None = None,
    restored_from: int | None = None,
) -> Revision:
    """Add the next revision to the transaction `tx` (a new version of the dataset at `tx.dest`).

    `files`: the relative paths the transaction changed; their live bytes become `before`, the new
    ones `after`. Call it last, once every changed file is written into `tx`.
    """
    live, real = tx.dest, Path(os.path.realpath(tx.dest))
    rev = latest_revision(tx.root) + 1
    rels = sorted(set(files))
    created = []
    for rel in rels:  # every path through `tx.file`: it never writes through a symbolically linked folder
        shutil.copyfile(tx.root / rel, tx.file(snapshot_path("", rev, "after", rel)))  # the commit syncs it
        before = live / rel
        if not before.is_file():
            created.append(rel)
        elif Path(os.path.realpath(before)) != real / rel:  # reached through a symbolic link: the file it
            # names stays live (another dataset may share it), so the snapshot is a copy
            shutil.copyfile(before, tx.file(snapshot_path("", rev, "before", rel)))
        else:
            _link(before, tx.file(snapshot_path("", rev, "before", rel)))
    record = Revision(
        id=rev,
        time=datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        by=by,
        message=message,
        episodes=sorted(set(int(e) for e in episodes)),
        styles={str(ep): sorted(set(s)) for ep, s in sorted((styles or {}).items())},
        ops={k: int(v) for k, v in sorted((ops or {}).items()) if int(v)},
        status={str(ep): s for ep, s in sorted((status or {}).items())},
        files=rels,
        created=created,
        restored_from=restored_from,
    )
    atomic_write_json(tx.file(_record_path(Path(), rev)), record.to_json(), durable=False)  # the commit syncs it
    return record


def edit_cost(root: Path | str, start: int, end: int) -> dict[str, int]:
    """The edit operations of the revisions after `start` up to `end` (start < end), summed."""
    if start > end:
        start, end = end, start
    total: dict[str, int] = {}
    for r in list_revisions(root):
        if start < r.id <= end:
            for op, n in r.ops.items():
                total[op] = total.get(op, 0) + n
    return dict(sorted(total.items()))


def parse_revision_spec(text: str) -> tuple[Path, int] | None:
    """`DATASET@rN` -> (DATASET, N) when DATASET is a local folder and the text names no existing path."""
    if Path(text).expanduser().exists():
        return None
    m = _SPEC.match(text)
    if m is None:
        return None
    root = Path(m.group("root")).expanduser()
    if not root.is_dir():
        return None
    return root, int(m.group("rev"))


@contextlib.contextmanager
def checkout(root: Path | str, rev: int) -> Iterator[Path]:
    """A temporary read-only copy of the dataset as it was at revision `rev` (hard links where possible).

    Built beside the dataset (one filesystem: links, no copies), else in the temp folder; removed on exit.
    """
    root = Path(root).resolve()
    if rev:
        read_revision(root, rev)
    # A scratch folder: one that a killed reader (`kill -9` mid-checkout) left is removed by the next.
    try:
        scratch = ScratchFolder(f".{root.name}.{CHECKOUT_TAG}", root.parent)
    except OSError:
        scratch = ScratchFolder(CHECKOUT_TAG)
    holder = scratch.path
    dest = holder / root.name
    try:
        changed = set(revision_files(root))
        _mirror(root, dest, "", changed)
        for rel in changed:
            src = file_at(root, rev, rel)
            if src is not None:
                _link(src, dest / rel)
        yield dest
    finally:
        scratch.cleanup()


def _mirror(src: Path, dst: Path, rel: str, changed: set[str]) -> None:
    """The files of `src` not in `changed` at `dst` (hard links where possible), without the work folder.

    A symbolic link becomes an absolute one to the same target (the copy lives elsewhere, where a
    relative one would point somewhere else); a linked folder holding a changed file is copied
    instead, so that the revision's bytes never land in the link's target.
    """
    dst.mkdir(parents=True, exist_ok=True)
    with os.scandir(src) as entries:
        for entry in entries:
            here = f"{rel}{entry.name}"
            source, target = Path(entry.path), dst / entry.name
            if here == WORK_DIR_NAME or here in changed:
                continue
            holds_changed = any(c.startswith(here + "/") for c in changed)
            if entry.is_symlink() and not holds_changed:
                os.symlink(os.path.realpath(source), target)
            elif entry.is_dir():  # follows a link only when it holds a changed file
                _mirror(source, target, here + "/", changed)
            else:
                _link(source, target)
