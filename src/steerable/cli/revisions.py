"""`steerable revisions DATASET`: the saves of `steerable view --edit`; what one changed; going back to one."""

from __future__ import annotations

import argparse
import json
from typing import ClassVar

from pydantic import Field, model_validator

from steerable.errors import ConfigError
from steerable.settings import Settings

__all__ = ["RevisionsSettings", "register"]

USAGE = """usage: steerable revisions DATASET [--show N | --restore N] [--json]

Every save of `steerable view --edit` is a revision (kept under DATASET/.steerable/revisions). Without options:
list them. Revision 0 is the dataset before the first one. Every option, with its default:
"""


class RevisionsSettings(Settings):
    """`steerable revisions`: list the revisions, show one, or go back to one."""

    positional: ClassVar[tuple[str, ...]] = ("dataset",)
    doc: ClassVar[str | None] = "docs/view.md"

    dataset: str = Field(description="a local dataset folder")
    show: int | None = Field(None, description="N: what revision N changed, per episode and style")
    restore: int | None = Field(
        None, description="N: make the dataset as it was at revision N (0: before the first); itself saved as a new "
        "revision")
    as_json: bool = Field(False, alias="json", description="print JSON")

    @model_validator(mode="after")
    def _one_action(self) -> RevisionsSettings:
        if self.show is not None and self.restore is not None:
            raise ConfigError("--show and --restore are two actions: choose one")
        if (self.show is not None and self.show < 1) or (self.restore is not None and self.restore < 0):
            raise ConfigError("--show takes a revision >= 1, --restore one >= 0")
        return self


def register(sub: argparse._SubParsersAction) -> None:
    from steerable.cli.flags import add_command

    add_command(sub, "revisions", func=run,
                help="list a dataset's revisions (the saves of `steerable view --edit`), show one, or go back to one")


def _ops(ops: dict[str, int]) -> str:
    return ", ".join(f"{n} {op.replace('_', ' ')}" for op, n in ops.items())


def run(args: argparse.Namespace) -> int:
    from steerable.cli.flags import parse_command

    cfg = parse_command(RevisionsSettings, args, USAGE)
    return 0 if cfg is None else _revisions(cfg)


def _revisions(args: RevisionsSettings) -> int:
    from pathlib import Path

    from steerable.dataset import LeRobotDataset
    from steerable.dataset.layout import WORK_DIR_NAME
    from steerable.dataset.lock import RunLock
    from steerable.dataset.review import restore_revision, revision_changes
    from steerable.dataset.revisions import list_revisions, read_revision

    ds = LeRobotDataset(Path(args.dataset).expanduser())
    if args.show is not None:
        record = read_revision(ds.root, args.show)
        changes = revision_changes(ds.root, args.show)
        if args.as_json:
            print(json.dumps({**record.to_json(), "changes": changes}))
            return 0
        print(f"r{record.id}  {record.time}  {record.by}  {record.message or ''}".rstrip())
        if record.status:
            print("status: " + ", ".join(f"episode {ep} {s}" for ep, s in record.status.items()))
        if record.ops:
            print(f"edits: {_ops(record.ops)}")
        for c in changes:
            print(f"episode {c['episode_index']} {c['style']}:")
            for line in c["removed"]:
                print(f"  - {line}")
            for line in c["added"]:
                print(f"  + {line}")
        if not changes:
            print("no rows changed")
        return 0
    if args.restore is not None:
        lock = RunLock.acquire(ds.root / WORK_DIR_NAME, ds.root, "steerable revisions --restore")
        try:
            made = restore_revision(ds, args.restore)
        finally:
            lock.release()
        if args.as_json:
            print(json.dumps({"revision": made.to_json() if made else None}))
        elif made is None:
            print(f"{ds.root} already is as at revision {args.restore}: nothing written")
        else:
            print(f"{ds.root} is back as at revision {args.restore} "
                  f"(saved as revision {made.id}: {len(made.files)} files)")
        return 0
    revisions = list_revisions(ds.root)
    if args.as_json:
        print(json.dumps({"revisions": [r.to_json() for r in revisions]}))
        return 0
    if not revisions:
        print(f"{ds.root} has no revisions (`steerable view {ds.root} --edit` makes one per save)")
        return 0
    for r in revisions:
        episodes = ", ".join(f"{ep} ({', '.join(s) or 'status'})" for ep, s in r.styles.items()) or ", ".join(
            str(e) for e in r.episodes)
        parts = [f"r{r.id}", r.time, r.by]
        parts.append(r.message or (f"episode {episodes}" if episodes else ""))
        if r.ops:
            parts.append(_ops(r.ops))
        print("  ".join(p for p in parts if p))
    return 0
