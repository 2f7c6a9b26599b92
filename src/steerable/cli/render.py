"""`steerable render DATASET --recipe R`: the chat samples a recipe makes of a dataset's frames."""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import Field, model_validator

from steerable.cli.options import Episodes, RecipeOptions, dataset_field, episodes_field
from steerable.errors import ConfigError

if TYPE_CHECKING:  # registering the parser must stay cheap: rich loads when the command runs
    from rich.console import Console

__all__ = ["RenderSettings", "register"]

USAGE = """usage: steerable render DATASET --recipe R [--all | --episode E [--frame F] | --episodes 0,3,7-9] [...]

Render a recipe over a dataset's frames: the chat samples training sees. Every option, with its default:
"""


class RenderSettings(RecipeOptions):
    """`steerable render`: which frames, through which recipe, shown how."""

    positional: ClassVar[tuple[str, ...]] = ("dataset",)
    doc: ClassVar[str | None] = "docs/render.md"

    dataset: str = dataset_field("annotated dataset root or Hub repo id")
    all: bool = Field(False, description="every frame of every episode")
    episode: int | None = Field(None, description="one episode (with --frame: one frame)")
    episodes: Episodes = episodes_field("these episodes: indices and ranges, e.g. 0,3,7-9")
    frame: int | None = Field(None, description="frame index inside --episode")
    as_json: bool = Field(False, alias="json", description="JSON lines, one per frame")
    fallback: Literal["none", "task"] = Field(
        "none", description="task: frames the recipe leaves empty get the plain-task low-level sample (as in training)")
    heuristic_rows: Literal["keep", "drop"] = Field(
        "keep", description="keep (default, as training renders): render the rows a heuristic wrote instead of a "
        "model too; drop: leave them out, as `steerable export` does by default")
    max_frames: int | None = Field(None, description="stop after this many frames")

    @model_validator(mode="after")
    def _one_scope(self) -> RenderSettings:
        scopes = [f for f, on in (("--all", self.all), ("--episode", self.episode is not None),
                                  ("--episodes", self.episodes is not None)) if on]
        if len(scopes) > 1:
            raise ConfigError(f"{' and '.join(scopes)} each choose the frames: give one")
        if self.frame is not None and self.episode is None:
            raise ConfigError("--frame needs --episode")
        return self


def register(sub: argparse._SubParsersAction) -> None:
    from steerable.cli.flags import add_command

    add_command(sub, "render", help="render a recipe over a dataset's frames (training samples)", func=run)


def run(args: argparse.Namespace) -> int:
    from steerable.cli.flags import parse_command

    cfg = parse_command(RenderSettings, args, USAGE)
    return 0 if cfg is None else _render(cfg)


def _render(args: RenderSettings) -> int:
    from steerable.dataset import open_dataset
    from steerable.dataset.provenance import read_provenance
    from steerable.recipes import load_recipe
    from steerable.train.samples import DatasetRenderer

    episodes = args.episodes
    ds = open_dataset(args.dataset)
    recipe = load_recipe(args.recipe, camera_map=args.cameras(ds.camera_keys))
    leave_out = read_provenance(ds.root, ds.info).stand_in_styles if args.heuristic_rows == "drop" else None
    renderer = DatasetRenderer(ds, recipe, options=args.render_options(), fallback=args.fallback, leave_out=leave_out)
    if args.episode is not None:
        frames = [args.frame] if args.frame is not None else None
        samples = renderer.episode_samples(ds.episode(args.episode).episode_index, frames)
    else:
        samples = renderer.samples([ds.episode(e).episode_index for e in episodes] if episodes else None)
    samples = itertools.islice(samples, args.max_frames)
    if args.as_json:
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

    head = (f"[bold]episode {sample.episode_index} frame {sample.frame_index}[/bold] "
            f"(index {sample.index}, t={sample.timestamp:.3f}s)")
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
