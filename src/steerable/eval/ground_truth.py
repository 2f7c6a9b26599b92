"""Score a dataset's annotations against the ground truth of a synthetic dataset (the short summary).

Reads what was written (the language columns), not what a module meant to write, so it measures the
annotator end to end: subtask spans vs true spans (segmentation F1 at IoU 0.5, boundary error), and
gripper events named by `motion` rows vs the true events (precision/recall within a tolerance).
The full metric set, against any gold, is `steerable.eval.runs.evaluate_dataset`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from steerable.dataset import LeRobotDataset
from steerable.dataset.lineage import no_ground_truth
from steerable.errors import DatasetError
from steerable.eval.gold import persistent_rows, subtask_segments
from steerable.eval.metrics import boundary_mae, event_precision_recall, segmentation_f1

__all__ = ["GroundTruthReport", "evaluate_against_ground_truth"]

GRIPPER_WORDS = {"close gripper": "close", "open gripper": "open"}


@dataclass
class GroundTruthReport:
    episodes: int
    subtask_precision: float
    subtask_recall: float
    subtask_f1: float
    boundary_mae_s: float
    event_precision: float
    event_recall: float
    event_f1: float
    predicted_subtasks: int
    true_subtasks: int
    motion_rows: int = 0  # 0: no motion rows were written, so the event scores mean nothing

    def as_dict(self) -> dict[str, Any]:
        return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in asdict(self).items()}


def evaluate_against_ground_truth(ds: LeRobotDataset, *, event_tolerance_s: float = 0.25) -> GroundTruthReport:
    """Pool the metrics over every episode that has both ground truth and subtask rows."""
    from steerable.synthetic import read_ground_truth

    try:
        truth = read_ground_truth(ds.root)
    except FileNotFoundError as exc:
        raise DatasetError(no_ground_truth(ds.root)) from exc
    matched = n_pred = n_true = 0
    ev_matched = ev_pred = ev_true = 0
    errors: list[float] = []
    episodes = motion_rows = 0
    for episode, rows, end in persistent_rows(ds):
        gt = truth.get(episode)
        segments = subtask_segments(rows, end)
        if gt is None or not segments:
            continue
        episodes += 1
        pred_spans = [(s.start, s.end) for s in segments]
        true_spans = [(s.start, s.end) for s in gt.subtasks]
        seg = segmentation_f1(pred_spans, true_spans)
        matched += seg.matched
        n_pred += len(pred_spans)
        n_true += len(true_spans)
        motion_rows += sum(1 for r in rows if r.get("style") == "motion")
        errors.append(boundary_mae([s.start for s in segments[1:]], [s.start for s in gt.subtasks[1:]]))
        for kind in ("close", "open"):
            pred = [
                float(r["timestamp"])
                for r in rows
                if r.get("style") == "motion" and GRIPPER_WORDS.get(str(r.get("content"))) == kind
            ]
            true = [e.time for e in gt.gripper_events if e.kind == kind]
            score = event_precision_recall(pred, true, event_tolerance_s)
            ev_matched += score.matched
            ev_pred += len(pred)
            ev_true += len(true)
    if episodes == 0:
        raise DatasetError(f"no episode of {ds.root} has both ground truth and subtask rows")
    p, r = _ratio(matched, n_pred), _ratio(matched, n_true)
    ep_, er = _ratio(ev_matched, ev_pred), _ratio(ev_matched, ev_true)
    return GroundTruthReport(
        episodes=episodes,
        subtask_precision=p,
        subtask_recall=r,
        subtask_f1=_f1(p, r),
        boundary_mae_s=sum(errors) / len(errors),
        event_precision=ep_,
        event_recall=er,
        event_f1=_f1(ep_, er),
        predicted_subtasks=n_pred,
        true_subtasks=n_true,
        motion_rows=motion_rows,
    )


def _ratio(a: int, b: int) -> float:
    return a / b if b else 0.0


def _f1(p: float, r: float) -> float:
    return 2 * p * r / (p + r) if p + r else 0.0
