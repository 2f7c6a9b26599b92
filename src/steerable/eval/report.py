"""Evaluate predicted segments against gold, or compare two runs against the same gold (paired bootstrap).

Only episodes present on both sides are scored; the others are listed in the report (coverage), so an
annotator that skipped episodes is seen, and a comparison pairs exactly the same episodes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from steerable.errors import DatasetError
from steerable.eval.gold import EpisodeSegments
from steerable.eval.labels import LabelMatcher
from steerable.eval.scoring import METRICS, bootstrap_weights, metrics_from_counts, score_episode

__all__ = ["CompareReport", "EvalReport", "compare_runs", "evaluate_segments"]

Interval = tuple[float, float]


@dataclass
class EvalReport:
    """Micro-averaged metrics over the scored episodes, bootstrap 95 % intervals, per-episode values."""

    label_matcher: str
    boundary_tolerance_s: float
    episodes: list[int]
    counts: np.ndarray
    metrics: dict[str, float]
    ci95: dict[str, Interval]
    missing_predictions: list[int] = field(default_factory=list)
    not_in_gold: list[int] = field(default_factory=list)
    resamples: int = 0

    def per_episode(self) -> list[dict[str, Any]]:
        rows = []
        for k, episode in enumerate(self.episodes):
            values = {m: float(v) for m, v in metrics_from_counts(self.counts[k]).items()}
            n = self.counts[k]
            rows.append({"episode_index": episode, "n_pred": int(n[1]), "n_gold": int(n[2]), **_clean(values)})
        return rows

    def as_dict(self) -> dict[str, Any]:
        return {
            "label_matcher": self.label_matcher,
            "boundary_tolerance_s": self.boundary_tolerance_s,
            "episodes": len(self.episodes),
            "coverage": {
                "scored": len(self.episodes),
                "gold_episodes_without_predictions": self.missing_predictions,
                "predicted_episodes_without_gold": self.not_in_gold,
            },
            "segments": {"predicted": int(self.counts[:, 1].sum()), "gold": int(self.counts[:, 2].sum())},
            "metrics": _clean(self.metrics),
            "ci95": {k: [_num(lo), _num(hi)] for k, (lo, hi) in self.ci95.items()},
            "bootstrap_resamples": self.resamples,
            "per_episode": self.per_episode(),
        }


@dataclass
class CompareReport:
    """Run A and run B on the same episodes; `diff` is B - A with its paired-bootstrap interval."""

    label_matcher: str
    episodes: list[int]
    a: EvalReport
    b: EvalReport
    diff: dict[str, float]
    diff_ci95: dict[str, Interval]
    p_b_better: dict[str, float]
    resamples: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "label_matcher": self.label_matcher,
            "episodes": len(self.episodes),
            "bootstrap_resamples": self.resamples,
            "a": self.a.as_dict(),
            "b": self.b.as_dict(),
            "diff_b_minus_a": _clean(self.diff),
            "diff_ci95": {k: [_num(lo), _num(hi)] for k, (lo, hi) in self.diff_ci95.items()},
            "p_b_better": _clean(self.p_b_better),
        }


def evaluate_segments(
    pred: EpisodeSegments,
    gold: EpisodeSegments,
    matcher: LabelMatcher,
    *,
    boundary_tolerance_s: float = 0.5,
    resamples: int = 1000,
    seed: int = 0,
) -> EvalReport:
    """Score every episode that has both predictions and gold; pool the counts; bootstrap the episodes."""
    episodes = sorted(set(pred) & set(gold))
    _require_overlap(episodes, pred, gold)
    counts = np.stack(
        [score_episode(pred[e], gold[e], matcher, boundary_tolerance_s=boundary_tolerance_s) for e in episodes]
    )
    return _report(episodes, counts, matcher, boundary_tolerance_s, resamples, seed, pred, gold)


def compare_runs(
    pred_a: EpisodeSegments,
    pred_b: EpisodeSegments,
    gold: EpisodeSegments,
    matcher: LabelMatcher,
    *,
    boundary_tolerance_s: float = 0.5,
    resamples: int = 1000,
    seed: int = 0,
) -> CompareReport:
    """A and B scored on the episodes all three share; B - A per metric with a paired bootstrap:
    each resample draws the same episodes for both runs."""
    episodes = sorted(set(pred_a) & set(pred_b) & set(gold))
    _require_overlap(episodes, {**pred_a, **pred_b}, gold)
    kw = {"boundary_tolerance_s": boundary_tolerance_s}
    ca = np.stack([score_episode(pred_a[e], gold[e], matcher, **kw) for e in episodes])
    cb = np.stack([score_episode(pred_b[e], gold[e], matcher, **kw) for e in episodes])
    a = _report(episodes, ca, matcher, boundary_tolerance_s, resamples, seed, pred_a, gold)
    b = _report(episodes, cb, matcher, boundary_tolerance_s, resamples, seed, pred_b, gold)
    weights = bootstrap_weights(len(episodes), resamples, seed)
    ma, mb = metrics_from_counts(weights @ ca), metrics_from_counts(weights @ cb)
    diff, diff_ci, p_better = {}, {}, {}
    for info in METRICS:
        x, y = ma[info.key], mb[info.key]
        diff[info.key] = b.metrics[info.key] - a.metrics[info.key]
        diff_ci[info.key] = _interval(y - x)
        ok = np.isfinite(x) & np.isfinite(y)
        if info.better > 0:
            wins = y[ok] > x[ok]
        elif info.better < 0:
            wins = y[ok] < x[ok]
        else:
            wins = np.abs(np.log(y[ok] + 1e-12)) < np.abs(np.log(x[ok] + 1e-12))
        p_better[info.key] = float(wins.mean()) if ok.any() else math.nan
    return CompareReport(matcher.description, episodes, a, b, diff, diff_ci, p_better, resamples)


def _report(
    episodes: list[int],
    counts: np.ndarray,
    matcher: LabelMatcher,
    tolerance: float,
    resamples: int,
    seed: int,
    pred: EpisodeSegments,
    gold: EpisodeSegments,
) -> EvalReport:
    metrics = {k: float(v) for k, v in metrics_from_counts(counts.sum(axis=0)).items()}
    ci: dict[str, Interval] = {}
    if resamples > 0:
        boot = metrics_from_counts(bootstrap_weights(len(episodes), resamples, seed) @ counts)
        ci = {k: _interval(v) for k, v in boot.items()}
    return EvalReport(
        label_matcher=matcher.description,
        boundary_tolerance_s=tolerance,
        episodes=episodes,
        counts=counts,
        metrics=metrics,
        ci95=ci,
        missing_predictions=sorted(set(gold) - set(pred)),
        not_in_gold=sorted(set(pred) - set(gold)),
        resamples=resamples,
    )


def _require_overlap(episodes: list[int], pred: EpisodeSegments, gold: EpisodeSegments) -> None:
    if not episodes:
        raise DatasetError(
            f"no episode has both predictions and gold: predicted {_span(pred)}, gold {_span(gold)}"
        )


def _span(segments: EpisodeSegments) -> str:
    if not segments:
        return "none"
    keys = sorted(segments)
    return f"{len(keys)} episodes ({keys[0]}..{keys[-1]})"


def _interval(values: np.ndarray) -> Interval:
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return (math.nan, math.nan)
    lo, hi = np.percentile(finite, [2.5, 97.5])
    return (float(lo), float(hi))


def _num(x: float) -> float | None:
    return None if math.isnan(x) or math.isinf(x) else round(float(x), 4)


def _clean(values: dict[str, float]) -> dict[str, float | None]:
    return {k: _num(v) for k, v in values.items()}
