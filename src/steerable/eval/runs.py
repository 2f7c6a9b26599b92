"""Evaluate annotated datasets end to end: read predictions and gold, score, and keep what the plot needs.

Without a gold source a synthetic dataset's own ground truth is the gold, and the gripper events its
`motion` rows name are scored too.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from steerable.dataset import LeRobotDataset, open_dataset
from steerable.eval.gold import EpisodeSegments, Gold, dataset_segments, ground_truth_segments, read_gold
from steerable.eval.labels import LabelMatcher
from steerable.eval.report import CompareReport, EvalReport, compare_runs, evaluate_segments

__all__ = ["Comparison", "Evaluation", "compare_datasets", "evaluate_dataset"]


@dataclass
class Evaluation:
    dataset: str
    gold: Gold
    predicted: EpisodeSegments
    report: EvalReport
    events: dict[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"dataset": self.dataset, "gold": self.gold.source, "gold_kind": self.gold.kind}
        out.update(self.report.as_dict())
        if self.events is not None:
            out["gripper_events"] = self.events
        return out


@dataclass
class Comparison:
    datasets: tuple[str, str]
    gold: Gold
    predicted: tuple[EpisodeSegments, EpisodeSegments]
    report: CompareReport

    @property
    def not_scored(self) -> list[int]:
        """Episodes that some but not all of A, B and the gold have."""
        seen = set(self.gold.segments) | set(self.predicted[0]) | set(self.predicted[1])
        return sorted(seen - set(self.report.episodes))

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"a": self.datasets[0], "b": self.datasets[1], "gold": self.gold.source}
        out["gold_kind"] = self.gold.kind
        out["not_scored"] = self.not_scored
        body = self.report.as_dict()
        body["a"] = {"dataset": self.datasets[0], **body["a"]}
        body["b"] = {"dataset": self.datasets[1], **body["b"]}
        out.update(body)
        return out


def _gold_for(ds: LeRobotDataset, gold: str | Path | None) -> Gold:
    return read_gold(gold) if gold is not None else ground_truth_segments(ds)


def evaluate_dataset(
    dataset: str | Path,
    matcher: LabelMatcher,
    *,
    gold: str | Path | None = None,
    boundary_tolerance_s: float = 0.5,
    event_tolerance_s: float = 0.25,
    resamples: int = 1000,
    seed: int = 0,
) -> Evaluation:
    """Score one annotated dataset against `gold` (a file or dataset), or its synthetic ground truth."""
    ds = open_dataset(dataset)
    source = _gold_for(ds, gold)
    predicted, _ = dataset_segments(ds)
    report = evaluate_segments(
        predicted, source.segments, matcher, boundary_tolerance_s=boundary_tolerance_s, resamples=resamples, seed=seed
    )
    events = None
    if source.kind == "ground_truth":
        from steerable.eval.ground_truth import evaluate_against_ground_truth

        r = evaluate_against_ground_truth(ds, event_tolerance_s=event_tolerance_s)
        if r.motion_rows:  # without motion rows (oracle language, a VLM-only run) there is nothing to score
            events = {
                "precision": round(r.event_precision, 4),
                "recall": round(r.event_recall, 4),
                "f1": round(r.event_f1, 4),
                "tolerance_s": event_tolerance_s,
            }
    return Evaluation(str(ds.root), source, predicted, report, events)


def compare_datasets(
    run_a: str | Path,
    run_b: str | Path,
    matcher: LabelMatcher,
    *,
    gold: str | Path | None = None,
    truth_from: str | Path | None = None,
    boundary_tolerance_s: float = 0.5,
    resamples: int = 1000,
    seed: int = 0,
) -> Comparison:
    """Score two annotated datasets against the same gold: `gold`, else the synthetic ground truth of
    `truth_from` (default: run A)."""
    ds_a, ds_b = open_dataset(run_a), open_dataset(run_b)
    base = ds_a if truth_from is None or gold is not None else open_dataset(truth_from)
    source = _gold_for(base, gold)
    pred_a, _ = dataset_segments(ds_a)
    pred_b, _ = dataset_segments(ds_b)
    report = compare_runs(
        pred_a, pred_b, source.segments, matcher,
        boundary_tolerance_s=boundary_tolerance_s, resamples=resamples, seed=seed,
    )
    return Comparison((str(ds_a.root), str(ds_b.root)), source, (pred_a, pred_b), report)
