"""`steerable eval DATASET`: score annotations against the ground truth of a synthetic dataset."""

from __future__ import annotations

import argparse
import json

__all__ = ["register"]


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("eval", help="score annotations against ground truth (synthetic datasets)")
    parser.add_argument("dataset", help="an annotated dataset with meta/steerable_ground_truth.json")
    parser.add_argument("--event_tolerance_s", type=float, default=0.25, help="gripper event match window")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from steerable.dataset import open_dataset
    from steerable.eval.ground_truth import evaluate_against_ground_truth

    report = evaluate_against_ground_truth(open_dataset(args.dataset), event_tolerance_s=args.event_tolerance_s)
    if args.json:
        print(json.dumps(report.as_dict()))
        return 0
    r = report
    print(f"{r.episodes} episodes evaluated against ground truth")
    print(
        f"subtasks: F1 {r.subtask_f1:.3f} (precision {r.subtask_precision:.3f}, recall {r.subtask_recall:.3f}; "
        f"{r.predicted_subtasks} predicted, {r.true_subtasks} true), boundary error {r.boundary_mae_s:.3f} s"
    )
    print(
        f"gripper events from motion rows: F1 {r.event_f1:.3f} "
        f"(precision {r.event_precision:.3f}, recall {r.event_recall:.3f}, within {args.event_tolerance_s} s)"
    )
    return 0
