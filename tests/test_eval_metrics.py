"""Segmentation metrics against hand-computed examples; the optimal matcher vs greedy; gold file parsing."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from steerable.errors import ConfigError
from steerable.eval.gold import Segment, read_gold_file
from steerable.eval.labels import make_label_matcher, normalize_label
from steerable.eval.matching import greedy_matching, optimal_matching
from steerable.eval.metrics import edit_score, iou, segment_matches
from steerable.eval.report import compare_runs, evaluate_segments
from steerable.eval.scoring import metrics_from_counts, score_episode

NORMALIZED = make_label_matcher("normalized")
EXACT = make_label_matcher("exact")
GOLD = [Segment(0.0, 2.0, "pick up cube"), Segment(2.0, 4.0, "place cube")]


def metrics(pred: list[Segment], gold: list[Segment], matcher=NORMALIZED) -> dict[str, float]:
    return {k: float(v) for k, v in metrics_from_counts(score_episode(pred, gold, matcher)).items()}


def test_empty_prediction_scores_zero_and_leaves_undefined_ratios_undefined() -> None:
    m = metrics([], GOLD)
    for key in ("seg_f1_25", "seg_f1_50", "seg_f1_75", "seg_recall_50", "boundary_f1", "edit", "f1_10", "e2e_f1"):
        assert m[key] == 0.0, key
    assert m["over_segmentation"] == 0.0
    assert math.isnan(m["seg_precision_50"]) and math.isnan(m["boundary_error_s"])
    assert metrics([], [])["seg_f1_50"] == 1.0  # nothing to find, nothing found


def test_one_long_span_against_two_gold_spans() -> None:
    # (0, 3) vs (0, 2): IoU 2/3; vs (2, 4): IoU 1/4. One match at 0.25 and 0.5, none at 0.75.
    m = metrics([Segment(0.0, 3.0, "pick up the cube")], GOLD)
    assert m["seg_f1_25"] == pytest.approx(2 / 3) and m["seg_f1_50"] == pytest.approx(2 / 3)
    assert m["seg_f1_75"] == 0.0
    assert m["seg_precision_50"] == 1.0 and m["seg_recall_50"] == 0.5
    assert m["boundary_error_s"] == pytest.approx(0.5)  # start off by 0, end by 1
    assert m["boundary_f1"] == 0.0  # the gold cut at 2.0 has no predicted cut
    assert m["over_segmentation"] == 0.5
    assert m["edit"] == pytest.approx(0.5)  # one deletion over two labels
    assert m["f1_50"] == pytest.approx(2 / 3) and m["e2e_f1"] == pytest.approx(2 / 3)
    assert m["label_accuracy"] == 1.0


def test_identical_spans_are_perfect() -> None:
    m = metrics(list(GOLD), GOLD, EXACT)
    assert m["boundary_error_s"] == 0.0 and m["over_segmentation"] == 1.0
    assert all(v == 1.0 for k, v in m.items() if k not in ("boundary_error_s",)), m


def test_boundaries_one_frame_late_still_match() -> None:
    late = 2.0 + 1 / 15  # one frame at 15 fps
    m = metrics([Segment(0.0, late, "pick up cube"), Segment(late, 4.0, "place cube")], GOLD)
    assert m["seg_f1_75"] == 1.0 and m["boundary_f1"] == 1.0 and m["e2e_f1"] == 1.0
    assert m["boundary_error_s"] == pytest.approx(1 / 30)  # (0 + 1/15 + 1/15 + 0) / 4
    assert metrics_from_counts(score_episode([Segment(0.0, 2.6, "a"), Segment(2.6, 4.0, "b")], GOLD, NORMALIZED))[
        "boundary_f1"
    ] == 0.0  # 0.6 s is outside the 0.5 s tolerance


def test_label_mismatch_counts_against_label_metrics_only() -> None:
    pred = [Segment(0.0, 2.0, "Pick up the cube."), Segment(2.0, 4.0, "open the drawer")]
    m = metrics(pred, GOLD)
    assert m["seg_f1_50"] == 1.0 and m["boundary_f1"] == 1.0
    assert m["e2e_f1"] == 0.5 and m["label_accuracy"] == 0.5 and m["edit"] == 0.5 and m["f1_50"] == 0.5
    strict = metrics(pred, GOLD, EXACT)
    assert strict["e2e_f1"] == 0.0 and strict["label_accuracy"] == 0.0 and strict["seg_f1_50"] == 1.0


def test_normalized_labels_and_edit_score() -> None:
    assert normalize_label("  Pick up THE red-cube! ") == "pick up red cube"
    same = NORMALIZED.same
    assert edit_score(["a", "b", "c"], ["a", "c"], same) == pytest.approx(2 / 3)
    assert edit_score([], [], same) == 1.0 and edit_score(["a"], [], same) == 0.0


def test_optimal_matching_finds_the_pair_greedy_loses() -> None:
    gold = [(0.0, 4.0), (4.0, 8.0)]
    pred = [(0.5, 6.0), (0.0, 2.0)]  # IoUs: p0-g0 0.58, p0-g1 0.27, p1-g0 0.5
    assert len(segment_matches(pred, gold, 0.25)) == 2
    scores = [[x if x >= 0.25 else None for x in (iou(p, g) for g in gold)] for p in pred]
    assert len(greedy_matching(scores)) == 1 and len(optimal_matching(scores)) == 2


def _brute_force(scores: list[list[float | None]]) -> tuple[int, float]:
    n, m = len(scores), len(scores[0]) if scores else 0
    best = (0, 0.0)
    for k in range(min(n, m), 0, -1):
        for rows in itertools.combinations(range(n), k):
            for cols in itertools.permutations(range(m), k):
                vals = [scores[r][c] for r, c in zip(rows, cols, strict=True)]
                if all(v is not None for v in vals):
                    best = max(best, (k, sum(v for v in vals if v is not None)))
        if best[0]:
            return best
    return best


spans = st.lists(
    st.tuples(st.floats(0, 10, allow_nan=False), st.floats(0.05, 5, allow_nan=False))
    .map(lambda t: (t[0], t[0] + t[1])),
    max_size=5,
)


@settings(max_examples=150, deadline=None)
@given(pred=spans, gold=spans, threshold=st.sampled_from([0.1, 0.25, 0.5]))
def test_optimal_matcher_is_never_worse_than_greedy(pred, gold, threshold) -> None:
    scores = [[x if x >= threshold and x > 0 else None for x in (iou(p, g) for g in gold)] for p in pred]
    opt, greedy = optimal_matching(scores), greedy_matching(scores)
    for pairs in (opt, greedy):
        assert len({i for i, _ in pairs}) == len(pairs) == len({j for _, j in pairs})
        assert all(scores[i][j] is not None for i, j in pairs)
    total = sum(scores[i][j] or 0.0 for i, j in opt)
    assert len(opt) >= len(greedy)
    if len(opt) == len(greedy):
        assert total >= sum(scores[i][j] or 0.0 for i, j in greedy) - 1e-9
    best_n, best_total = _brute_force(scores)
    assert len(opt) == best_n and total == pytest.approx(best_total)


def test_micro_average_bootstrap_and_paired_compare() -> None:
    gold = {0: list(GOLD), 1: list(GOLD), 2: list(GOLD)}
    good = {0: list(GOLD), 1: list(GOLD), 2: [Segment(0.0, 4.0, "pick up cube")]}
    bad = {e: [Segment(3.5, 4.0, "x")] for e in range(3)}
    report = evaluate_segments(good, gold, NORMALIZED, resamples=200, seed=1)
    assert report.metrics["seg_f1_50"] == pytest.approx(2 * 5 / (5 + 6))  # pooled, not a mean of F1s
    lo, hi = report.ci95["seg_f1_50"]
    assert lo <= report.metrics["seg_f1_50"] <= hi
    again = evaluate_segments(good, gold, NORMALIZED, resamples=200, seed=1)
    assert again.ci95 == report.ci95  # seeded
    cmp = compare_runs(bad, good, gold, NORMALIZED, resamples=200)
    assert cmp.diff["seg_f1_50"] > 0 and cmp.p_b_better["seg_f1_50"] == 1.0
    assert cmp.diff_ci95["seg_f1_50"][0] > 0
    same = compare_runs(good, good, gold, NORMALIZED, resamples=50)
    assert same.diff_ci95["seg_f1_50"] == (0.0, 0.0) and same.p_b_better["seg_f1_50"] == 0.0


def test_gold_files_json_jsonl_and_their_errors(tmp_path: Path) -> None:
    row = {"video": "videos/episode_000007.mp4", "instruction": "tidy", "segments": [
        {"start_sec": 1.0, "end_sec": 2.0, "subtask": "b"}, {"start_sec": 0.0, "end_sec": 1.0, "subtask": "a"}]}
    j = tmp_path / "gold.json"
    j.write_text(json.dumps([row, {"episode_index": 3, "segments": []}]))
    gold = read_gold_file(j)
    assert gold == {7: [Segment(0.0, 1.0, "a"), Segment(1.0, 2.0, "b")], 3: []}
    j.write_text('[{"episode_index": 0,\n "segments": [}]\n')
    with pytest.raises(ConfigError, match=r"gold.json:2:15: not valid JSON"):
        read_gold_file(j)
    bad = tmp_path / "gold.jsonl"
    bad.write_text(json.dumps(row) + "\n\n{not json\n")
    with pytest.raises(ConfigError, match=r"gold.jsonl:3: not valid JSON"):
        read_gold_file(bad)
    cases = {
        '{"episode_index": 1, "segments": [{"start_sec": 2, "end_sec": 1, "subtask": "a"}]}': "start_sec < end_sec",
        '{"episode_index": 1, "segments": [{"start_sec": 0, "end_sec": "1", "subtask": "a"}]}': "numeric",
        '{"video": "clip.mp4", "segments": []}': "cannot tell the episode",
        '{"segments": []}': "needs episode_index",
        '{"episode_index": 1}': "'segments' must be a list",
    }
    for text, message in cases.items():
        bad.write_text(text + "\n")
        with pytest.raises(ConfigError, match=message):
            read_gold_file(bad)
    twice = json.dumps({"episode_index": 1, "segments": []})
    bad.write_text(twice + "\n" + twice)
    with pytest.raises(ConfigError, match=r"gold.jsonl:2: episode 1 appears twice"):
        read_gold_file(bad)
