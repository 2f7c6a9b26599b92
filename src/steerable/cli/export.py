"""`steerable export DATASET --recipe R --out DIR`: rendered samples as OpenAI-chat JSONL or an HF dataset."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import ClassVar, Literal

from pydantic import Field

from steerable.cli.options import Episodes, RecipeOptions, dataset_field, episodes_field

__all__ = ["NOTHING_EXPORTED", "ExportSettings", "register"]

NOTHING_EXPORTED = 1  # the run worked but produced no sample (unannotated dataset, recipe renders nothing)

USAGE = """usage: steerable export DATASET --recipe R --out DIR [--format jsonl|hf] [--episodes 0,3,7-9] [...]

Export rendered samples for VLM fine-tuning: OpenAI-chat JSONL with JPEG files, or a Hugging Face `datasets`
folder. Every option, with its default:
"""


class ExportSettings(RecipeOptions):
    """`steerable export`: which samples, in which form, where."""

    positional: ClassVar[tuple[str, ...]] = ("dataset",)
    doc: ClassVar[str | None] = "docs/export.md"

    dataset: str = dataset_field("annotated dataset root or Hub repo id")
    out: str = Field(description="output folder (created; must be empty or absent)")
    format: Literal["jsonl", "hf"] = Field(
        "jsonl", description="jsonl: OpenAI chat lines + JPEG files; hf: a Hugging Face `datasets` folder "
        "(load_from_disk)")
    max_samples: int | None = Field(None, description="stop after this many samples")
    episodes: Episodes = episodes_field()
    fallback: Literal["none", "task"] = Field(
        "none", description="task: frames the recipe leaves empty become plain-task low-level samples instead of "
        "being skipped")
    keep_untargeted: bool | None = Field(
        None, description="also export samples without a text target (low-level turns only: they train actions, "
        "not the VLM); skipped and counted by default, kept by default with --fallback task")
    heuristic_rows: Literal["drop", "keep"] = Field(
        "drop", description="drop (default): leave out the rows a heuristic wrote instead of a model (e.g. the "
        "subtasks of episodes without video; the provenance file records them per episode); keep: export them too")
    overwrite: bool = Field(False, description="replace a non-empty --out folder")


def register(sub: argparse._SubParsersAction) -> None:
    from steerable.cli.flags import add_command

    add_command(sub, "export", help="export rendered samples for VLM fine-tuning (JSONL or HF datasets)", func=run)


def run(args: argparse.Namespace) -> int:
    from steerable.cli.flags import parse_command

    cfg = parse_command(ExportSettings, args, USAGE)
    return 0 if cfg is None else _export(cfg)


def _export(args: ExportSettings) -> int:
    from steerable.dataset import open_dataset
    from steerable.recipes import load_recipe
    from steerable.train.export import export_samples

    episodes = args.episodes
    ds = open_dataset(args.dataset)
    if not ds.has_language:
        print(f"steerable: {ds.root} is not annotated (no language columns): nothing to export; "
              "run `steerable annotate` on it first", file=sys.stderr)
        return NOTHING_EXPORTED
    recipe = load_recipe(args.recipe, camera_map=args.cameras(ds.camera_keys))
    chosen = [ds.episode(e) for e in episodes] if episodes is not None else ds.episodes
    with _progress(sum(e.length for e in chosen)) as advance:
        report = export_samples(
            ds,
            recipe,
            args.out,
            format=args.format,
            max_samples=args.max_samples,
            episodes=episodes,
            fallback=args.fallback,
            keep_untargeted=args.keep_untargeted,
            heuristic_rows=args.heuristic_rows,
            options=args.render_options(),
            overwrite=args.overwrite,
            progress=advance,
        )
    heuristic = _heuristic(report.heuristic)
    if report.samples == 0 and report.untargeted:
        print(f"steerable: none of the {report.untargeted} samples the recipe rendered on {ds.root} has a text "
              f"target: nothing was exported; --keep_untargeted exports them{heuristic}", file=sys.stderr)
        return NOTHING_EXPORTED
    if report.samples == 0:
        hint = "" if args.fallback == "task" else "; --fallback task exports plain-task samples for them"
        print(f"steerable: the recipe rendered no sample on the {report.skipped} frames of {ds.root}: "
              f"nothing was exported{hint}{heuristic}", file=sys.stderr)
        return NOTHING_EXPORTED
    untargeted = f", {report.untargeted} samples without a text target skipped" if report.untargeted else ""
    print(f"exported {report.samples} samples ({report.images} images, {report.skipped} empty frames skipped"
          f"{untargeted}{heuristic}) as {report.format} to {report.path}")
    return 0


def _heuristic(left_out: dict[int, list[str]]) -> str:
    """'; heuristic rows left out: subtask of episode(s) 3-9 (--heuristic_rows keep exports them)', or ''."""
    from steerable.dataset.summary import index_ranges

    if not left_out:
        return ""
    by_style: dict[str, list[int]] = {}
    for episode, styles in sorted(left_out.items()):
        for style in styles:
            by_style.setdefault(style, []).append(episode)
    what = ", ".join(f"{style} of episode(s) {index_ranges(eps)}" for style, eps in sorted(by_style.items()))
    return f"; heuristic rows left out: {what} (--heuristic_rows keep exports them)"


@contextmanager
def _progress(total: int) -> Iterator[Callable[[int], None]]:
    """A rich progress bar over frames on stderr, when stderr is a terminal."""
    from rich.console import Console
    from rich.progress import Progress

    with Progress(console=Console(stderr=True), disable=not sys.stderr.isatty(), transient=True) as bar:
        task = bar.add_task("rendering frames", total=total)
        yield lambda n: bar.advance(task, n)
