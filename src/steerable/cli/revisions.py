"""`steerable revisions DATASET`: the saves of `steerable view --edit`; what one changed; going back to one."""

from __future__ import annotations

import argparse
import json

from steerable.errors import ConfigError

__all__ = ["register"]


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "revisions",
        help="list a dataset's revisions (the saves of `steerable view --edit`), show one, or go back to one",
        description="Every save of `steerable view --edit` is a revision (kept under DATASET/.steerable/revisions). "
        "Without options: list them. Revision 0 is the dataset before the first one.",
    )
    parser.add_argument("dataset", help="a local dataset folder")
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--show", type=int, metavar="N", help="what revision N changed, per episode and style")
    what.add_argument(
        "--restore", type=int, metavar="N",
        help="make the dataset as it was at revision N (0: before the first); itself saved as a new revision",
    )
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.set_defaults(func=run)


def _ops(ops: dict[str, int]) -> str:
    return ", ".join(f"{n} {op.replace('_', ' ')}" for op, n in ops.items())


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from steerable.dataset import LeRobotDataset
    from steerable.dataset.layout import WORK_DIR_NAME
    from steerable.dataset.lock import RunLock
    from steerable.dataset.review import restore_revision, revision_changes
    from steerable.dataset.revisions import list_revisions, read_revision

    if (args.show is not None and args.show < 1) or (args.restore is not None and args.restore < 0):
        raise ConfigError("--show takes a revision >= 1, --restore one >= 0")
    ds = LeRobotDataset(Path(args.dataset).expanduser())
    if args.show is not None:
        record = read_revision(ds.root, args.show)
        changes = revision_changes(ds.root, args.show)
        if args.json:
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
        if args.json:
            print(json.dumps({"revision": made.to_json() if made else None}))
        elif made is None:
            print(f"{ds.root} already is as at revision {args.restore}: nothing written")
        else:
            print(f"{ds.root} is back as at revision {args.restore} (saved as revision {made.id}: {len(made.files)} files)")
        return 0
    revisions = list_revisions(ds.root)
    if args.json:
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
