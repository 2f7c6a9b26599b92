"""`steerable info DATASET`: what a dataset holds, for people (table) or machines (--json)."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, ClassVar

from pydantic import Field

from steerable.cli.options import dataset_field
from steerable.settings import Settings

if TYPE_CHECKING:
    from steerable.dataset.summary import DatasetSummary

__all__ = ["InfoSettings", "register"]

USAGE = """usage: steerable info DATASET [--json] [--revision REV]

What a dataset holds: episodes, cameras, features, tasks, language. Every option, with its default:
"""


class InfoSettings(Settings):
    """`steerable info`: which dataset, and for whom."""

    positional: ClassVar[tuple[str, ...]] = ("dataset",)
    doc: ClassVar[str | None] = "docs/info.md"

    dataset: str = dataset_field("local dataset root, or a Hub repo id (downloaded first)")
    revision: str | None = Field(None, description="Hub revision (default: the v3.0 tag)")
    as_json: bool = Field(False, alias="json", description="print one JSON object")


def register(sub: argparse._SubParsersAction) -> None:
    from steerable.cli.flags import add_command

    add_command(sub, "info", help="show a dataset's episodes, cameras, features, tasks, language", func=run)


def run(args: argparse.Namespace) -> int:
    from steerable.cli.flags import parse_command
    from steerable.dataset import open_dataset
    from steerable.dataset.summary import summarize

    cfg = parse_command(InfoSettings, args, USAGE)
    if cfg is None:
        return 0
    summary = summarize(open_dataset(cfg.dataset, revision=cfg.revision))
    if cfg.as_json:
        print(json.dumps(summary.to_json(), indent=2))
    else:
        _print_human(summary)
    return 0


def _print_human(s: DatasetSummary) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from steerable.dataset.summary import index_ranges

    # Dataset text (paths, tasks, feature names) is escaped: a '[red]' in it is data, not markup.
    console = Console(highlight=False, soft_wrap=True)
    console.print(f"[bold]{escape(str(s.root))}[/bold]  ({s.codebase_version}, robot: {escape(s.robot_type or '?')})")
    console.print(
        f"{s.total_episodes} episodes, {s.total_frames} frames at {s.fps} fps "
        f"({s.total_frames / max(s.fps, 1):.1f} s), {s.total_tasks} task(s)"
    )
    cams = Table("camera", "codec", "size", "video files", title="Cameras", title_justify="left")
    for key, c in s.cameras.items():
        files = f"{c.files_present}/{c.files_expected or '?'}"
        cams.add_row(escape(key), escape(str(c.codec)), f"{c.width}x{c.height}", files)
    console.print(cams)
    for key, c in s.cameras.items():
        if c.missing_episodes:
            console.print(
                f"[yellow]missing videos:[/yellow] {escape(key)}: episode(s) {index_ranges(c.missing_episodes)} "
                "have no video file",
                soft_wrap=True,
            )
    if s.video_folder_hint:
        console.print(f"[yellow]hint:[/yellow] {escape(s.video_folder_hint)}", soft_wrap=True)
    feats = Table("feature", "dtype", "shape", title="Features", title_justify="left")
    for name, f in s.features.items():
        feats.add_row(escape(name), escape(str(f.dtype)), str(tuple(f.shape)))
    console.print(feats)
    console.print("[bold]Tasks[/bold]")
    for task in s.tasks[:20]:
        console.print(f"  - {escape(task)}")
    if len(s.tasks) > 20:
        console.print(f"  ... and {len(s.tasks) - 20} more")
    lang = s.language
    if lang is None:
        console.print("Language: none (run `steerable annotate` to add subtasks, plans, memory...)")
        return
    table = Table("column", "style", "rows", "written by", title="Language", title_justify="left")
    for column, counts in (("persistent", lang.persistent), ("events", lang.events)):
        for style, n in counts.items():
            table.add_row(column, escape(style), str(n), escape(_written_by(s, style)))
    console.print(table)
    from steerable.dataset.lineage import PROVENANCE, TOOL_CATALOGUE, missing_notice

    if s.review:
        console.print("Review: " + ", ".join(f"{n} {status}" for status, n in s.review.items()))
    elif PROVENANCE in s.missing_metadata:  # the review records live in the same block
        console.print("Review: not recorded (LeRobot's dataset tools drop the review records with the provenance; "
                      "without them `steerable annotate` redoes episodes a person reviewed)")

    default = " (not declared: steerable's default catalogue)" if TOOL_CATALOGUE in s.missing_metadata else ""
    console.print(f"Tools: {escape(', '.join(lang.tools))}{default}")
    if s.missing_metadata:
        console.print(f"[yellow]note:[/yellow] {escape(missing_notice(s.root, s.missing_metadata) or '')}")


def _written_by(s: DatasetSummary, style: str) -> str:
    """The style's producer, and the episodes whose rows of it a person corrected (`steerable view --edit`)."""
    from steerable.dataset.summary import index_ranges

    who = s.producers.get(style, "not recorded")
    edited = s.human.get(style)
    return f"{who}; human: episode(s) {index_ranges(edited)}" if edited else who
