"""`steerable export DATASET --recipe R --out DIR`: rendered samples as OpenAI-chat JSONL or an HF dataset."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from steerable.cli._dataset_args import parse_episodes
from steerable.cli._recipe_args import add_recipe_args, camera_map, render_options

__all__ = ["NOTHING_EXPORTED", "register"]

NOTHING_EXPORTED = 1  # the run worked but produced no sample (unannotated dataset, recipe renders nothing)


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("export", help="export rendered samples for VLM fine-tuning (JSONL or HF datasets)")
    parser.add_argument("dataset", help="annotated dataset root or Hub repo id (alias: --dataset D)")
    add_recipe_args(parser)
    parser.add_argument("--out", required=True, help="output folder (created; must be empty or absent)")
    parser.add_argument(
        "--format",
        choices=["jsonl", "hf"],
        default="jsonl",
        help="jsonl: OpenAI chat lines + JPEG files; hf: a Hugging Face `datasets` folder (load_from_disk)",
    )
    parser.add_argument("--max_samples", type=int, default=None, help="stop after this many samples")
    parser.add_argument("--episodes", default=None, metavar="0,3,7-9",
                        help="only these episodes: indices and ranges (alias: --only_episodes)")
    parser.add_argument(
        "--fallback",
        choices=["none", "task"],
        default="none",
        help="task: frames the recipe leaves empty become plain-task low-level samples instead of being skipped",
    )
    parser.add_argument(
        "--keep_untargeted",
        action="store_true",
        default=None,
        help="also export samples without a text target (low-level turns only: they train actions, not "
        "the VLM); skipped and counted by default, kept by default with --fallback task",
    )
    parser.add_argument(
        "--heuristic_rows",
        choices=["drop", "keep"],
        default="drop",
        help="drop (default): leave out the rows a heuristic wrote instead of a model (e.g. the subtasks of "
        "episodes without video; the provenance file records them per episode); keep: export them too",
    )
    parser.add_argument("--overwrite", action="store_true", help="replace a non-empty --out folder")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from steerable.dataset import open_dataset
    from steerable.recipes import load_recipe
    from steerable.train.export import export_samples

    episodes = parse_episodes(args.episodes)
    ds = open_dataset(args.dataset)
    if not ds.has_language:
        print(f"steerable: {ds.root} is not annotated (no language columns): nothing to export; "
              "run `steerable annotate` on it first", file=sys.stderr)
        return NOTHING_EXPORTED
    recipe = load_recipe(args.recipe, camera_map=camera_map(args.camera_map, ds.camera_keys))
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
            options=render_options(args),
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
