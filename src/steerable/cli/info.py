"""`steerable info DATASET`: what a dataset holds, for people (table) or machines (--json)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from rich.console import Console
from rich.table import Table

__all__ = ["register"]


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("info", help="show a dataset's episodes, cameras, features, tasks, language")
    parser.add_argument("dataset", help="local dataset root, or a Hub repo id (downloaded first)")
    parser.add_argument("--revision", default=None, help="Hub revision (default: the v3.0 tag)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from steerable.dataset import open_dataset
    from steerable.dataset.summary import summarize

    summary = summarize(open_dataset(args.dataset, revision=args.revision))
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        _print_human(summary)
    return 0


def _print_human(s: dict[str, Any]) -> None:
    console = Console(highlight=False)
    console.print(f"[bold]{s['root']}[/bold]  ({s['codebase_version']}, robot: {s['robot_type'] or '?'})")
    console.print(
        f"{s['total_episodes']} episodes, {s['total_frames']} frames at {s['fps']} fps "
        f"({s['total_frames'] / max(s['fps'], 1):.1f} s), {s['total_tasks']} task(s)"
    )
    cams = Table("camera", "codec", "size", "video files", title="Cameras", title_justify="left")
    for key, c in s["cameras"].items():
        files = f"{c['files_present']}/{c.get('files_expected', '?')}"
        cams.add_row(key, str(c["codec"]), f"{c['width']}x{c['height']}", files)
    console.print(cams)
    feats = Table("feature", "dtype", "shape", title="Features", title_justify="left")
    for name, f in s["features"].items():
        feats.add_row(name, str(f["dtype"]), str(tuple(f["shape"])))
    console.print(feats)
    console.print("[bold]Tasks[/bold]")
    for task in s["tasks"][:20]:
        console.print(f"  - {task}")
    if len(s["tasks"]) > 20:
        console.print(f"  ... and {len(s['tasks']) - 20} more")
    lang = s["language"]
    if lang is None:
        console.print("Language: none (run `steerable annotate` to add subtasks, plans, memory...)")
        return
    table = Table("column", "style", "rows", title="Language", title_justify="left")
    for column in ("persistent", "events"):
        for style, n in lang[column].items():
            table.add_row(column, style, str(n))
    console.print(table)
    console.print(f"Tools: {', '.join(str(t) for t in lang['tools'])}")
