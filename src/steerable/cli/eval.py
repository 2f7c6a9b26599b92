"""`steerable eval DATASET [--gold FILE_OR_DATASET]` or `steerable eval [DATASET] --compare A B`: score subtask spans."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from steerable.errors import ConfigError

__all__ = ["register"]


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "eval",
        help="score subtask annotations against gold spans (a file, a dataset, or synthetic ground truth)",
        description="Score a dataset's subtask rows against gold spans, or compare two annotated datasets "
        "against the same gold with paired bootstrap intervals. Without --gold, a synthetic dataset's "
        "ground truth is the gold.",
    )
    parser.add_argument(
        "dataset",
        nargs="?",
        help="an annotated dataset (local folder or Hub id); with --compare, the synthetic dataset whose "
        "ground truth is the gold when --gold is not given (default: RUN_A's)",
    )
    parser.add_argument("--gold", help="gold spans: a JSON/JSONL file (WGO-Bench rows) or an annotated dataset")
    parser.add_argument("--compare", nargs=2, metavar=("RUN_A", "RUN_B"), help="two annotated datasets to compare")
    parser.add_argument("--json", action="store_true", help="print one JSON object (with per-episode values)")
    parser.add_argument("--plot", type=Path, metavar="PNG", help="write timelines and metric bars to this PNG")
    parser.add_argument(
        "--labels", default="auto", choices=("auto", "exact", "normalized", "embedding"),
        help="how labels are matched (auto: embedding when installed, else normalized)",
    )
    parser.add_argument("--embed_model", help="a local sentence-transformers model folder for --labels embedding")
    parser.add_argument("--embed_threshold", type=float, default=0.85, help="cosine similarity for a label match")
    parser.add_argument("--boundary_tolerance_s", type=float, default=0.5, help="boundary match window")
    parser.add_argument("--event_tolerance_s", type=float, default=0.25, help="gripper event match window")
    parser.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples (0: no intervals)")
    parser.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    parser.add_argument("--plot_episodes", type=int, default=4, help="episodes drawn in the plot")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from steerable.eval.labels import make_label_matcher
    from steerable.eval.runs import compare_datasets, evaluate_dataset
    from steerable.eval.tables import comparison_table, evaluation_table, format_episode_list

    if args.dataset is None and args.compare is None:
        raise ConfigError("give DATASET to score, or --compare RUN_A RUN_B")
    if min(args.resamples, args.boundary_tolerance_s, args.event_tolerance_s, args.plot_episodes) < 0:
        raise ConfigError("--resamples, --plot_episodes and the tolerances must not be negative")
    matcher = make_label_matcher(args.labels, model=args.embed_model, threshold=args.embed_threshold)
    common = {
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
            _plot(args, matcher, cmp.gold.segments, [("A", cmp.predicted[0], cmp.report.a), ("B", cmp.predicted[1], cmp.report.b)])
        if args.json:
            print(json.dumps(cmp.as_dict()))
            return 0
        console.print(f"A: {cmp.datasets[0]}\nB: {cmp.datasets[1]}\ngold: {cmp.gold.source}")
        console.print(f"labels matched by {cmp.report.label_matcher}")
        console.print(comparison_table(cmp))
        if cmp.not_scored:
            console.print(f"episodes missing from A, B or the gold (not scored): {format_episode_list(cmp.not_scored)}")
    else:
        ev = evaluate_dataset(args.dataset, matcher, event_tolerance_s=args.event_tolerance_s, **common)
        if args.plot:
            _plot(args, matcher, ev.gold.segments, [("predicted", ev.predicted, ev.report)])
        if args.json:
            print(json.dumps(ev.as_dict()))
            return 0
        r = ev.report
        console.print(f"dataset: {ev.dataset}\ngold: {ev.gold.source}")
        console.print(f"labels matched by {r.label_matcher}")
        console.print(evaluation_table(ev))
        if r.missing_predictions:
            console.print(f"gold episodes without subtask rows (not scored): {format_episode_list(r.missing_predictions)}")
        if r.not_in_gold:
            console.print(f"predicted episodes without gold (not scored): {format_episode_list(r.not_in_gold)}")
    if args.plot:
        console.print(f"plot: {args.plot}")
    return 0


def _plot(args: argparse.Namespace, matcher: Any, gold: Any, runs: Any) -> None:
    from steerable.eval.plot import plot_report

    plot_report(args.plot, gold, runs, same=matcher.same, episodes=args.plot_episodes)
