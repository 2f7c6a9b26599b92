"""`steerable render DATASET --recipe R`: the chat samples a recipe makes of a dataset's frames."""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from steerable.cli._dataset_args import parse_episodes
from steerable.cli._recipe_args import add_recipe_args, camera_map, render_options
from steerable.errors import ConfigError

if TYPE_CHECKING:  # registering the parser must stay cheap: rich loads when the command runs
    from rich.console import Console

__all__ = ["register"]


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("render", help="render a recipe over a dataset's frames (training samples)")
    parser.add_argument("dataset", help="annotated dataset root or Hub repo id (alias: --dataset D)")
    add_recipe_args(parser)
    scope = parser.add_mutually_exclusive_group()
    scope.add_argument("--all", action="store_true", help="every frame of every episode")
    scope.add_argument("--episode", type=int, help="one episode (with --frame: one frame)")
    scope.add_argument("--episodes", metavar="0,3,7-9", help="these episodes (alias: --only_episodes)")
    parser.add_argument("--frame", type=int, help="frame index inside --episode")
    parser.add_argument("--json", action="store_true", help="JSON lines, one per frame")
    parser.add_argument(
        "--fallback",
        choices=["none", "task"],
        default="none",
        help="task: frames the recipe leaves empty get the plain-task low-level sample (as in training)",
    )
    parser.add_argument(
        "--heuristic_rows",
        choices=["keep", "drop"],
        default="keep",
        help="keep (default, as training renders): render the rows a heuristic wrote instead of a model too; "
        "drop: leave them out, as `steerable export` does by default",
    )
    parser.add_argument("--max_frames", type=int, default=None, help="stop after this many frames")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from steerable.dataset import open_dataset
    from steerable.dataset.provenance import read_provenance
    from steerable.recipes import load_recipe
    from steerable.train.samples import DatasetRenderer

    if args.frame is not None and args.episode is None:
        raise ConfigError("--frame needs --episode")
    episodes = parse_episodes(args.episodes)
    ds = open_dataset(args.dataset)
    recipe = load_recipe(args.recipe, camera_map=camera_map(args.camera_map, ds.camera_keys))
    leave_out = read_provenance(ds.root, ds.info).stand_in_styles if args.heuristic_rows == "drop" else None
    renderer = DatasetRenderer(ds, recipe, options=render_options(args), fallback=args.fallback, leave_out=leave_out)
    if args.episode is not None:
        frames = [args.frame] if args.frame is not None else None
        samples = renderer.episode_samples(ds.episode(args.episode).episode_index, frames)
    else:
        samples = renderer.samples([ds.episode(e).episode_index for e in episodes] if episodes else None)
    samples = itertools.islice(samples, args.max_frames)
    if args.json:
        _write_json(samples)
        stats: dict[str, Any] = {"stats": renderer.stats.as_dict()}
        if renderer.left_out:  # only with --heuristic_rows drop: episode -> styles whose rows were left out
            stats["heuristic_left_out"] = {str(e): styles for e, styles in sorted(renderer.left_out.items())}
        print(json.dumps(stats), file=sys.stderr)
        return 0
    from rich.console import Console  # the human view only: --json output needs no rich

    console = Console(highlight=False, soft_wrap=True)
    for sample in samples:
        _print_sample(console, sample)
    _print_stats(console, renderer.stats.as_dict())
    for episode, styles in sorted(renderer.left_out.items()):
        console.print(f"episode {episode}: heuristic rows left out ({', '.join(styles)})")
    return 0


def _write_json(samples: Iterable[Any]) -> None:
    """One JSON line per frame, written in blocks (a write per line costs more than the encoding)."""
    encode = json.JSONEncoder(ensure_ascii=False, check_circular=False).encode
    block: list[str] = []
    try:
        for sample in samples:
            block.append(encode(sample.to_json()))
            if len(block) == 1024:
                sys.stdout.write("\n".join(block) + "\n")
                block.clear()
    finally:  # the frames before an error are printed, as with a write per line
        if block:
            sys.stdout.write("\n".join(block) + "\n")


def _print_sample(console: Console, sample: Any) -> None:
    from rich.markup import escape

    head = f"[bold]episode {sample.episode_index} frame {sample.frame_index}[/bold] (index {sample.index}, t={sample.timestamp:.3f}s)"
    if sample.sample is None:
        console.print(f"{head}  [dim]nothing to render ({sample.component or 'recipe'})[/dim]")
        return
    tag = " [yellow]fallback[/yellow]" if sample.fallback else ""
    console.print(f"{head}  component {sample.sample.component or sample.component}{tag}")
    s = sample.sample
    for i, (message, stream) in enumerate(zip(s.messages, s.message_streams, strict=True)):
        target = " target" if i in s.target_message_indices else ""
        content = message.get("content")
        if isinstance(content, list):
            content = " ".join(
                b.get("text", f"<{b.get('type')} {b.get('feature', '')}>") for b in content if isinstance(b, dict)
            )
        calls = message.get("tool_calls")
        if calls:
            content = f"{content or ''} {json.dumps(calls, ensure_ascii=False)}".strip()
        # Escaped: annotation text is data, and '[/x]' in it is not markup.
        console.print(f"  {message['role']:>9} {escape(f'[{stream}{target}]')} {escape(str(content))}")


def _print_stats(console: Console, stats: dict[str, Any]) -> None:
    from rich.table import Table

    table = Table("component", "drawn", "rendered", "fell back", "empty", title=f"{stats['frames']} frames")
    for name, c in stats["components"].items():
        table.add_row(name or "(recipe)", str(c["drawn"]), str(c["rendered"]), str(c["fell_back"]), str(c["empty"]))
    console.print(table)
