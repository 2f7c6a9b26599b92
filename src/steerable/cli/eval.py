"""`steerable eval DATASET [--gold FILE_OR_DATASET]` or `steerable eval [DATASET] --compare A B`: score subtask spans.

Any dataset argument may name a revision of a local dataset, `DATASET@rN` (`steerable revisions`; r0:
before the first): `steerable eval DS@r0 --gold DS@r3` scores the model's annotation against the
person's correction and reports the edit cost, the edit operations of the revisions in between per
minute of video.
"""

from __future__ import annotations

import argparse
import contextlib
import json
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field

from steerable.cli.options import dataset_field
from steerable.errors import ConfigError
from steerable.settings import Settings

__all__ = ["EvalSettings", "register"]

USAGE = """usage: steerable eval DATASET [--gold FILE_OR_DATASET] [--json] [--plot PNG] [...]
       steerable eval [DATASET] --compare RUN_A RUN_B [--gold FILE_OR_DATASET] [...]

Score a dataset's subtask rows against gold spans, or compare two annotated datasets against the same gold with
paired bootstrap intervals. Without --gold, a synthetic dataset's ground truth is the gold. Any dataset may be a
revision of a local dataset, DATASET@rN. Every option, with its default:
"""


class EvalSettings(Settings):
    """`steerable eval`: what to score, against which gold, and how labels and boundaries match."""

    positional: ClassVar[tuple[str, ...]] = ("dataset",)
    doc: ClassVar[str | None] = "docs/eval.md"

    dataset: str | None = dataset_field(
        "an annotated dataset (local folder or Hub id); with --compare, the synthetic dataset whose ground truth is "
        "the gold when --gold is not given (default: RUN_A's)", required=False)
    gold: str | None = Field(
        None, description="gold spans: a JSON/JSONL file (WGO-Bench rows) or an annotated dataset (DATASET@rN: a "
        "revision)")
    compare: list[str] | None = Field(None, json_schema_extra={"nargs": 2},
                                      description="RUN_A RUN_B: two annotated datasets to compare")
    as_json: bool = Field(False, alias="json", description="print one JSON object (with per-episode values)")
    plot: Path | None = Field(None, description="PNG: write timelines and metric bars to this PNG")
    labels: Literal["auto", "exact", "normalized", "embedding"] = Field(
        "auto", description="how labels are matched (auto: embedding when installed, else normalized)")
    embed_model: str | None = Field(None, description="a local sentence-transformers model folder for --labels "
                                    "embedding")
    embed_threshold: float = Field(0.85, description="cosine similarity for a label match")
    boundary_tolerance_s: float = Field(0.5, description="boundary match window")
    event_tolerance_s: float = Field(0.25, description="gripper event match window")
    resamples: int = Field(1000, description="bootstrap resamples (0: no intervals)")
    seed: int = Field(0, description="bootstrap seed")
    plot_episodes: int = Field(4, description="episodes drawn in the plot")


def register(sub: argparse._SubParsersAction) -> None:
    from steerable.cli.flags import add_command

    add_command(sub, "eval", func=run,
                help="score subtask annotations against gold spans (a file, a dataset, or synthetic ground truth)")


def run(args: argparse.Namespace) -> int:
    from steerable.cli.flags import parse_command

    cfg = parse_command(EvalSettings, args, USAGE)
    if cfg is None:
        return 0
    with contextlib.ExitStack() as stack:
        resolved, cost = _revisions(cfg, stack)
        return _run(resolved, cfg, cost)


def _revisions(cfg: EvalSettings, stack: contextlib.ExitStack) -> tuple[EvalSettings, dict[str, Any] | None]:
    """The settings with each `DATASET@rN` argument checked out as a temporary folder; the edit cost
    between the two revisions when DATASET and --gold are revisions of one dataset."""
    from steerable.dataset.revisions import checkout, parse_revision_spec

    specs: dict[str, tuple[Path, int]] = {}

    def resolve(value: str | None) -> str | None:
        spec = parse_revision_spec(value) if value else None
        if spec is None:
            return value
        specs[str(value)] = spec
        return str(stack.enter_context(checkout(*spec)))

    compare = None if cfg.compare is None else [str(resolve(c)) for c in cfg.compare]
    resolved = cfg.model_copy(update={"dataset": resolve(cfg.dataset), "gold": resolve(cfg.gold), "compare": compare})
    a, b = specs.get(str(cfg.dataset)), specs.get(str(cfg.gold))
    if a is None or b is None or a[0].resolve() != b[0].resolve():
        return resolved, None
    return resolved, _edit_cost(a[0], a[1], b[1])


def _edit_cost(root: Path, start: int, end: int) -> dict[str, Any]:
    """The edit operations of the revisions from `start` to `end`, per minute of the dataset's video."""
    from steerable.dataset import LeRobotDataset
    from steerable.dataset.revisions import edit_cost

    ops = edit_cost(root, start, end)
    ds = LeRobotDataset(root)
    minutes = ds.total_frames / max(ds.fps, 1) / 60
    counted = {k: v for k, v in ops.items() if k != "status"}
    total = sum(counted.values())
    return {
        "from": start, "to": end, "operations": ops, "edits": total, "video_minutes": round(minutes, 4),
        "edits_per_minute": round(total / minutes, 3) if minutes else None,
        "per_minute": {k: round(v / minutes, 3) for k, v in counted.items()} if minutes else {},
    }


_OP_NAMES = {
    "move": "boundary moves", "split": "splits", "merge": "merges", "retype": "retypes", "add": "rows added",
    "delete": "rows deleted", "move_event": "events moved", "delete_event": "events deleted", "box": "box/point edits",
}


def _cost_line(cost: dict[str, Any]) -> str:
    kinds = ", ".join(
        f"{n} {_OP_NAMES.get(k, k.replace('_', ' '))}" for k, n in cost["operations"].items() if k != "status"
    ) or "no edits"
    rate = f" = {cost['edits_per_minute']:.2f} edits per minute" if cost["edits_per_minute"] is not None else ""
    return f"edit cost r{cost['from']} -> r{cost['to']}: {kinds} over {cost['video_minutes']:.2f} min of video{rate}"


def _run(args: EvalSettings, shown: EvalSettings, cost: dict[str, Any] | None) -> int:
    """Score with `args` (revisions checked out); report the datasets as `shown` (as given)."""
    from rich.console import Console

    from steerable.eval.labels import make_label_matcher
    from steerable.eval.runs import compare_datasets, evaluate_dataset
    from steerable.eval.tables import comparison_table, evaluation_table, format_episode_list

    if args.dataset is None and args.compare is None:
        raise ConfigError("give DATASET to score, or --compare RUN_A RUN_B")
    if min(args.resamples, args.boundary_tolerance_s, args.event_tolerance_s, args.plot_episodes) < 0:
        raise ConfigError("--resamples, --plot_episodes and the tolerances must not be negative")
    matcher = make_label_matcher(args.labels, model=args.embed_model, threshold=args.embed_threshold)
    common: dict[str, Any] = {
        "gold": args.gold,
        "boundary_tolerance_s": args.boundary_tolerance_s,
        "resamples": args.resamples,
        "seed": args.seed,
    }
    # No markup: paths and labels are printed as they are ('runs/[v2]' is a folder, not a style).
    console = Console(highlight=False, soft_wrap=True, markup=False)
    if not console.is_terminal:
        console.width = max(console.width, 100)  # piped or logged: room for the whole table
    if args.compare is not None:
        cmp = compare_datasets(args.compare[0], args.compare[1], matcher, truth_from=args.dataset, **common)
        if args.plot:
            runs = [("A", cmp.predicted[0], cmp.report.a), ("B", cmp.predicted[1], cmp.report.b)]
            _plot(args, matcher, cmp.gold.segments, runs)
        if args.as_json:
            print(json.dumps(cmp.as_dict()))
            return 0
        console.print(f"A: {cmp.datasets[0]}\nB: {cmp.datasets[1]}\ngold: {cmp.gold.source}")
        console.print(f"labels matched by {cmp.report.label_matcher}")
        console.print(comparison_table(cmp))
        if cmp.not_scored:
            console.print(f"episodes missing from A, B or the gold (not scored): {format_episode_list(cmp.not_scored)}")
    elif args.dataset is not None:  # checked above: DATASET or --compare
        ev = evaluate_dataset(args.dataset, matcher, event_tolerance_s=args.event_tolerance_s, **common)
        if shown.dataset != args.dataset:
            ev.dataset = str(shown.dataset)
        if shown.gold != args.gold:
            ev.gold.source = str(shown.gold)
        if args.plot:
            _plot(args, matcher, ev.gold.segments, [("predicted", ev.predicted, ev.report)])
        if args.as_json:
            print(json.dumps({**ev.as_dict(), **({"edit_cost": cost} if cost else {})}))
            return 0
        r = ev.report
        console.print(f"dataset: {ev.dataset}\ngold: {ev.gold.source}")
        console.print(f"labels matched by {r.label_matcher}")
        console.print(evaluation_table(ev))
        if r.missing_predictions:
            missing = format_episode_list(r.missing_predictions)
            console.print(f"gold episodes without subtask rows (not scored): {missing}")
        if r.not_in_gold:
            console.print(f"predicted episodes without gold (not scored): {format_episode_list(r.not_in_gold)}")
        if cost:
            console.print(_cost_line(cost))
    if args.plot:
        console.print(f"plot: {args.plot}")
    return 0


def _plot(args: EvalSettings, matcher: Any, gold: Any, runs: Any) -> None:
    from steerable.eval.plot import plot_report

    assert args.plot is not None  # called for --plot only

    plot_report(args.plot, gold, runs, same=matcher.same, episodes=args.plot_episodes)
