"""Scores for keystates and segmentations: event P/R, segment F1, boundary matching, edit score, F1@tau.

Segments and events are matched one-to-one by `optimal_matching` (most matches, then the best total
IoU or closeness), never greedily: a greedy pass can lose a match when one span overlaps two.
Spans are (start, end) in seconds; labels are compared by a `same(a, b)` callable (`labels.py`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

from steerable.eval.matching import optimal_matching

__all__ = [
    "MatchScore",
    "boundary_mae",
    "boundary_matches",
    "edit_score",
    "event_precision_recall",
    "internal_boundaries",
    "iou",
    "mstcn_true_positives",
    "segment_matches",
    "segmentation_f1",
    "spans_from_starts",
]

Span = tuple[float, float]
SameLabel = Callable[[str, str], bool]


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


def event_precision_recall(
    pred_times: Sequence[float], true_times: Sequence[float], tolerance_s: float
) -> MatchScore:
    """Events matched one-to-one when within `tolerance_s` of each other."""
    return _score(len(_point_matches(pred_times, true_times, tolerance_s)), len(pred_times), len(true_times))


def _point_matches(pred: Sequence[float], true: Sequence[float], tolerance_s: float) -> list[tuple[int, int]]:
    scale = tolerance_s if tolerance_s > 0 else 1.0
    scores = [[(1.0 - abs(p - t) / scale) if abs(p - t) <= tolerance_s else None for t in true] for p in pred]
    return optimal_matching(scores)


def iou(a: Span, b: Span) -> float:
    """Temporal intersection over union of two spans (0 when they only touch)."""
    inter = max(0.0, min(a[1], b[1]) - max(a[0], b[0]))
    union = max(a[1], b[1]) - min(a[0], b[0])
    return inter / union if union > 0 else 0.0


def segment_matches(
    pred_spans: Sequence[Span],
    true_spans: Sequence[Span],
    iou_threshold: float,
    allowed: Callable[[int, int], bool] | None = None,
) -> list[tuple[int, int, float]]:
    """Optimal one-to-one (pred, true, IoU) matches at IoU >= threshold; `allowed` can veto pairs."""
    ious = [[iou(p, t) for t in true_spans] for p in pred_spans]
    scores = [
        [
            x if x >= iou_threshold and x > 0 and (allowed is None or allowed(i, j)) else None
            for j, x in enumerate(row)
        ]
        for i, row in enumerate(ious)
    ]
    return [(i, j, ious[i][j]) for i, j in optimal_matching(scores)]


def segmentation_f1(
    pred_spans: Sequence[Span], true_spans: Sequence[Span], iou_threshold: float = 0.5
) -> MatchScore:
    """Segments matched one-to-one when their temporal IoU reaches `iou_threshold`."""
    matches = segment_matches(pred_spans, true_spans, iou_threshold)
    return _score(len(matches), len(pred_spans), len(true_spans))


def internal_boundaries(spans: Sequence[Span], eps: float = 1e-6) -> list[float]:
    """Every start and end inside the annotated range: the first start and the last end are not cuts."""
    if not spans:
        return []
    first = min(s for s, _ in spans)
    last = max(e for _, e in spans)
    points = sorted({t for span in spans for t in span if first + eps < t < last - eps})
    merged: list[float] = []
    for t in points:  # a gap-free cover gives each cut twice (an end and the next start)
        if not merged or t - merged[-1] > eps:
            merged.append(t)
    return merged


def boundary_matches(pred: Sequence[float], true: Sequence[float], tolerance_s: float) -> int:
    """How many boundaries match one-to-one within `tolerance_s` (most matches possible)."""
    return len(_point_matches(pred, true, tolerance_s))


def boundary_mae(pred: Sequence[float], true: Sequence[float]) -> float:
    """Mean distance from each true boundary to the nearest predicted one (0 with no true boundary).

    With no predicted boundary at all the error is infinite.
    """
    if not true:
        return 0.0
    if not pred:
        return float("inf")
    return sum(min(abs(p - t) for p in pred) for t in true) / len(true)


def edit_score(pred_labels: Sequence[str], true_labels: Sequence[str], same: SameLabel) -> float:
    """MS-TCN edit score in [0, 1]: 1 - Levenshtein(pred, true) / the longer length (1 when both empty)."""
    n, m = len(pred_labels), len(true_labels)
    if max(n, m) == 0:
        return 1.0
    prev = list(range(m + 1))
    for i in range(1, n + 1):
        cur = [i] + [0] * m
        for j in range(1, m + 1):
            sub = prev[j - 1] + (0 if same(pred_labels[i - 1], true_labels[j - 1]) else 1)
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, sub)
        prev = cur
    return 1.0 - prev[m] / max(n, m)


def mstcn_true_positives(
    pred: Sequence[tuple[Span, str]], true: Sequence[tuple[Span, str]], overlap: float, same: SameLabel
) -> int:
    """True positives of MS-TCN's F1@overlap: each predicted segment, in order, claims the same-label
    true segment it overlaps most, if that IoU reaches `overlap` and the true segment is still free."""
    hit = [False] * len(true)
    tp = 0
    for span, label in pred:
        best, best_iou = -1, -1.0
        for j, (t_span, t_label) in enumerate(true):
            x = iou(span, t_span) if same(label, t_label) else 0.0
            if x > best_iou:
                best, best_iou = j, x
        if best >= 0 and best_iou >= overlap and best_iou > 0 and not hit[best]:
            hit[best] = True
            tp += 1
    return tp


def spans_from_starts(starts: Sequence[float], end: float) -> list[Span]:
    """Gap-free spans from sorted segment starts: each runs to the next start, the last to `end`."""
    bounds = [*starts, end]
    return [(bounds[i], bounds[i + 1]) for i in range(len(starts))]
