"""Scores for keystates and segmentations against ground truth (event P/R, segment F1, boundary MAE).

Matching is one-to-one and greedy by closeness. For segments at IoU >= 0.5 greedy matching is
also optimal: two disjoint predicted spans cannot both overlap one true span by more than half.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

__all__ = ["MatchScore", "boundary_mae", "event_precision_recall", "segmentation_f1", "spans_from_starts"]

Span = tuple[float, float]


class MatchScore(NamedTuple):
    """Precision, recall and F1 of a one-to-one matching, and how many pairs matched."""

    precision: float
    recall: float
    f1: float
    matched: int


def _score(matched: int, n_pred: int, n_true: int) -> MatchScore:
    # With nothing predicted (or nothing true) the vacuous side is perfect only if the other is empty too.
    precision = matched / n_pred if n_pred else float(n_true == 0)
    recall = matched / n_true if n_true else float(n_pred == 0)
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return MatchScore(precision, recall, f1, matched)


def _greedy(pairs: list[tuple[float, int, int]]) -> int:
    """Count of one-to-one matches taking (cost, pred, true) pairs cheapest first."""
    used_pred: set[int] = set()
    used_true: set[int] = set()
    for _, p, t in sorted(pairs):
        if p not in used_pred and t not in used_true:
            used_pred.add(p)
            used_true.add(t)
    return len(used_pred)


def event_precision_recall(
    pred_times: Sequence[float], true_times: Sequence[float], tolerance_s: float
) -> MatchScore:
    """Events matched one-to-one when within `tolerance_s` of each other."""
    pairs = [
        (abs(p - t), i, j)
        for i, p in enumerate(pred_times)
        for j, t in enumerate(true_times)
        if abs(p - t) <= tolerance_s
    ]
    return _score(_greedy(pairs), len(pred_times), len(true_times))


def _iou(a: Span, b: Span) -> float:
    inter = max(0.0, min(a[1], b[1]) - max(a[0], b[0]))
    union = max(a[1], b[1]) - min(a[0], b[0])
    return inter / union if union > 0 else 0.0


def segmentation_f1(
    pred_spans: Sequence[Span], true_spans: Sequence[Span], iou_threshold: float = 0.5
) -> MatchScore:
    """Segments matched one-to-one when their temporal IoU reaches `iou_threshold`."""
    pairs = []
    for i, p in enumerate(pred_spans):
        for j, t in enumerate(true_spans):
            iou = _iou(p, t)
            if iou >= iou_threshold:
                pairs.append((-iou, i, j))
    return _score(_greedy(pairs), len(pred_spans), len(true_spans))


def boundary_mae(pred: Sequence[float], true: Sequence[float]) -> float:
    """Mean distance from each true boundary to the nearest predicted one (0 with no true boundary).

    With no predicted boundary at all the error is infinite.
    """
    if not true:
        return 0.0
    if not pred:
        return float("inf")
    return sum(min(abs(p - t) for p in pred) for t in true) / len(true)


def spans_from_starts(starts: Sequence[float], end: float) -> list[Span]:
    """Gap-free spans from sorted segment starts: each runs to the next start, the last to `end`."""
    bounds = [*starts, end]
    return [(bounds[i], bounds[i + 1]) for i in range(len(starts))]
