"""Per-episode counts and the metrics made from them, micro-averaged, with bootstrap intervals.

Each episode is scored once into a vector of additive counts (matches, segments, boundaries, errors);
every metric is a ratio of sums of those counts. So pooling episodes, and resampling them for a
bootstrap, is a weighted sum followed by the same arithmetic: no episode is re-scored.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from steerable.eval.gold import Segment
from steerable.eval.labels import LabelMatcher
from steerable.eval.metrics import (
    boundary_matches,
    edit_score,
    internal_boundaries,
    mstcn_true_positives,
    segment_matches,
)

__all__ = [
    "COUNTS",
    "METRICS",
    "MetricInfo",
    "bootstrap_weights",
    "metrics_from_counts",
    "score_episode",
]

IOU_THRESHOLDS = (0.25, 0.5, 0.75)
MSTCN_OVERLAPS = (0.10, 0.25, 0.50)

# The additive counts of one episode, in this order.
COUNTS = (
    "episodes",
    "n_pred",
    "n_gold",
    "tp_25",
    "tp_50",
    "tp_75",
    "label_ok_50",
    "tp_e2e",
    "err_sum_s",
    "err_n",
    "b_pred",
    "b_gold",
    "b_tp",
    "edit_sum",
    "f_tp_10",
    "f_tp_25",
    "f_tp_50",
)
_C = {name: i for i, name in enumerate(COUNTS)}


@dataclass(frozen=True)
class MetricInfo:
    key: str
    title: str
    better: int  # +1 higher is better, -1 lower is better, 0 closer to 1 is better
    doc: str


METRICS = (
    MetricInfo("seg_f1_25", "segment F1 @IoU 0.25", 1, "one-to-one optimal matching, labels ignored"),
    MetricInfo("seg_f1_50", "segment F1 @IoU 0.5", 1, "one-to-one optimal matching, labels ignored"),
    MetricInfo("seg_f1_75", "segment F1 @IoU 0.75", 1, "one-to-one optimal matching, labels ignored"),
    MetricInfo("seg_precision_50", "segment precision @0.5", 1, "matched / predicted segments"),
    MetricInfo("seg_recall_50", "segment recall @0.5", 1, "matched / gold segments"),
    MetricInfo("boundary_f1", "boundary F1 (±tol)", 1, "internal cuts matched one-to-one within the tolerance"),
    MetricInfo("boundary_error_s", "boundary error (s)", -1, "mean |start|,|end| error of pairs matched @0.5"),
    MetricInfo("over_segmentation", "over-segmentation", 0, "predicted / gold segments (1 is right)"),
    MetricInfo("edit", "edit score", 1, "MS-TCN: 1 - Levenshtein of label sequences / longer length"),
    MetricInfo("f1_10", "F1@10", 1, "MS-TCN: same label and IoU >= 0.10"),
    MetricInfo("f1_25", "F1@25", 1, "MS-TCN: same label and IoU >= 0.25"),
    MetricInfo("f1_50", "F1@50", 1, "MS-TCN: same label and IoU >= 0.50"),
    MetricInfo("label_accuracy", "label accuracy @0.5", 1, "matched pairs whose labels agree"),
    MetricInfo("e2e_f1", "end-to-end F1", 1, "IoU >= 0.5 and the label agrees, optimal matching"),
)


def score_episode(
    pred: Sequence[Segment], gold: Sequence[Segment], matcher: LabelMatcher, *, boundary_tolerance_s: float = 0.5
) -> np.ndarray:
    """The additive counts (`COUNTS`) of one episode."""
    c = np.zeros(len(COUNTS))
    p_spans = [(s.start, s.end) for s in pred]
    g_spans = [(s.start, s.end) for s in gold]
    c[_C["episodes"]] = 1
    c[_C["n_pred"]], c[_C["n_gold"]] = len(pred), len(gold)
    for thr, key in zip(IOU_THRESHOLDS, ("tp_25", "tp_50", "tp_75"), strict=True):
        matches = segment_matches(p_spans, g_spans, thr)
        c[_C[key]] = len(matches)
        if thr == 0.5:
            c[_C["label_ok_50"]] = sum(matcher.same(pred[i].label, gold[j].label) for i, j, _ in matches)
            c[_C["err_sum_s"]] = sum(abs(pred[i].start - gold[j].start) + abs(pred[i].end - gold[j].end)
                                     for i, j, _ in matches)
            c[_C["err_n"]] = 2 * len(matches)
    same_label = lambda i, j: matcher.same(pred[i].label, gold[j].label)  # noqa: E731
    c[_C["tp_e2e"]] = len(segment_matches(p_spans, g_spans, 0.5, allowed=same_label))
    b_pred, b_gold = internal_boundaries(p_spans), internal_boundaries(g_spans)
    c[_C["b_pred"]], c[_C["b_gold"]] = len(b_pred), len(b_gold)
    c[_C["b_tp"]] = boundary_matches(b_pred, b_gold, boundary_tolerance_s)
    c[_C["edit_sum"]] = edit_score([s.label for s in pred], [s.label for s in gold], matcher.same)
    p_lab = [((s.start, s.end), s.label) for s in pred]
    g_lab = [((s.start, s.end), s.label) for s in gold]
    for overlap, key in zip(MSTCN_OVERLAPS, ("f_tp_10", "f_tp_25", "f_tp_50"), strict=True):
        c[_C[key]] = mstcn_true_positives(p_lab, g_lab, overlap, matcher.same)
    return c


def metrics_from_counts(counts: np.ndarray) -> dict[str, np.ndarray]:
    """Every metric of `METRICS` from summed counts; works on any leading shape (e.g. resamples x counts).

    F1 with nothing predicted and nothing gold is 1 (vacuous); ratios with a zero denominator are NaN.
    """
    c = {name: counts[..., i] for name, i in _C.items()}
    n = c["n_pred"] + c["n_gold"]
    out = {
        "seg_f1_25": _ratio(2 * c["tp_25"], n, 1.0),
        "seg_f1_50": _ratio(2 * c["tp_50"], n, 1.0),
        "seg_f1_75": _ratio(2 * c["tp_75"], n, 1.0),
        "seg_precision_50": _ratio(c["tp_50"], c["n_pred"], np.nan),
        "seg_recall_50": _ratio(c["tp_50"], c["n_gold"], np.nan),
        "boundary_f1": _ratio(2 * c["b_tp"], c["b_pred"] + c["b_gold"], 1.0),
        "boundary_error_s": _ratio(c["err_sum_s"], c["err_n"], np.nan),
        "over_segmentation": _ratio(c["n_pred"], c["n_gold"], np.nan),
        "edit": _ratio(c["edit_sum"], c["episodes"], np.nan),
        "f1_10": _ratio(2 * c["f_tp_10"], n, 1.0),
        "f1_25": _ratio(2 * c["f_tp_25"], n, 1.0),
        "f1_50": _ratio(2 * c["f_tp_50"], n, 1.0),
        "label_accuracy": _ratio(c["label_ok_50"], c["tp_50"], np.nan),
        "e2e_f1": _ratio(2 * c["tp_e2e"], n, 1.0),
    }
    return out


def _ratio(num: np.ndarray, den: np.ndarray, empty: float) -> np.ndarray:
    num, den = np.asarray(num, dtype=float), np.asarray(den, dtype=float)
    out = np.full(np.broadcast(num, den).shape, empty, dtype=float)
    np.divide(num, den, out=out, where=den > 0)
    return out


def bootstrap_weights(n_episodes: int, resamples: int, seed: int) -> np.ndarray:
    """(resamples x episodes) counts of how often each episode is drawn; rows sum to `n_episodes`."""
    rng = np.random.default_rng(seed)
    return rng.multinomial(n_episodes, np.full(n_episodes, 1.0 / n_episodes), size=resamples).astype(float)
