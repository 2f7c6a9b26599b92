"""Benchmark: scoring segmentations, optimal vs greedy matching, count-based vs re-scoring bootstrap.

Gold episodes are random gap-free covers (3-12 subtasks); predictions perturb them the way annotators
err: boundaries jittered, spans split, neighbours merged, a span dropped. Both matchers see the same
pairs. The bootstrap is timed as one matrix product of resample weights and per-episode counts (ours),
against a loop over resamples that pools the same cached counts episode by episode, and against
re-scoring each resample's episodes from scratch (timed on a few resamples, extrapolated); all agree.
Run: `python benchmarks/eval.py [--episodes 500 --resamples 1000]`.
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Callable

import numpy as np

from steerable.eval.gold import Segment
from steerable.eval.labels import make_label_matcher
from steerable.eval.matching import _solve, greedy_matching, optimal_matching
from steerable.eval.metrics import iou
from steerable.eval.scoring import bootstrap_weights, metrics_from_counts, score_episode

VERBS = ("pick up", "place", "push", "open", "close", "wipe")
OBJECTS = ("the cup", "the red cube", "the drawer", "the plate", "the sponge")


def gold_episode(rng: random.Random) -> list[Segment]:
    n = rng.randint(3, 12)
    cuts = sorted(rng.uniform(0, 30) for _ in range(n - 1))
    bounds = [0.0, *cuts, 30.0]
    return [Segment(bounds[i], bounds[i + 1], f"{rng.choice(VERBS)} {rng.choice(OBJECTS)}") for i in range(n)]


def predict(rng: random.Random, gold: list[Segment]) -> list[Segment]:
    out: list[Segment] = []
    for s in gold:
        r = rng.random()
        if r < 0.1 and out:  # merged into the previous span
            out[-1] = Segment(out[-1].start, s.end, out[-1].label)
        elif r < 0.2:  # split in two
            mid = rng.uniform(s.start, s.end)
            out += [Segment(s.start, mid, s.label), Segment(mid, s.end, rng.choice(VERBS))]
        elif r < 0.25:  # dropped
            continue
        else:
            out.append(s if rng.random() < 0.7 else Segment(s.start, s.end, f"{rng.choice(VERBS)} it"))
    cuts = [max(0.0, min(30.0, s.start + rng.gauss(0, 0.6))) for s in out[1:]]
    bounds = [0.0, *sorted(cuts), 30.0]
    return [Segment(bounds[i], bounds[i + 1], s.label) for i, s in enumerate(out) if bounds[i + 1] > bounds[i]]


Matcher = Callable[[list[list[float | None]]], list[tuple[int, int]]]


def matcher_row(
    name: str, fn: Matcher, pairs: list[tuple[list[Segment], list[Segment]]], threshold: float
) -> tuple[str, float, int, float, float, float]:
    matches = n_pred = n_gold = 0
    total_iou = 0.0
    start = time.process_time()
    for pred, gold in pairs:
        ious = [[iou((p.start, p.end), (g.start, g.end)) for g in gold] for p in pred]
        scores = [[x if x >= threshold and x > 0 else None for x in row] for row in ious]
        chosen = fn(scores)
        matches += len(chosen)
        total_iou += sum(ious[i][j] for i, j in chosen)
        n_pred += len(pred)
        n_gold += len(gold)
    seconds = time.process_time() - start
    return (name, threshold, matches, 2 * matches / (n_pred + n_gold), total_iou, seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--episodes", type=int, default=500)
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--plain_resamples", type=int, default=20, help="resamples for the re-scoring bootstrap")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    golds = [gold_episode(rng) for _ in range(args.episodes)]
    pairs = [(predict(rng, g), g) for g in golds]
    matcher = make_label_matcher("normalized")

    rows = []
    for threshold in (0.1, 0.25, 0.5):
        greedy = matcher_row("greedy", greedy_matching, pairs, threshold)
        optimal = matcher_row("optimal (ours)", optimal_matching, pairs, threshold)
        assert optimal[2] >= greedy[2]
        rows += [greedy, optimal]

    # One long episode (10 minutes, 300 gold subtasks): solved per connected group vs as one matrix.
    cuts = sorted(rng.uniform(0, 600) for _ in range(299))
    long_gold = list(zip([0.0, *cuts], [*cuts, 600.0], strict=True))
    long_pred = [(max(0.0, a + rng.gauss(0, 0.5)), b) for a, b in long_gold]
    long_scores = [[x if x >= 0.25 else None for x in (iou(p, g) for g in long_gold)] for p in long_pred]
    start = time.process_time()
    grouped = optimal_matching(long_scores)
    grouped_s = time.process_time() - start
    start = time.process_time()
    whole = _solve(long_scores)
    whole_s = time.process_time() - start
    assert len(whole) == len(grouped)

    start = time.process_time()
    counts = np.stack([score_episode(p, g, matcher) for p, g in pairs])
    score_s = time.process_time() - start

    weights = bootstrap_weights(len(pairs), args.resamples, args.seed)
    start = time.process_time()
    ours = metrics_from_counts(weights @ counts)["seg_f1_50"]
    boot_s = time.process_time() - start

    start = time.process_time()
    looped = []
    for w in weights:
        drawn = np.repeat(np.arange(len(pairs)), w.astype(int))
        looped.append(float(metrics_from_counts(counts[drawn].sum(axis=0))["seg_f1_50"]))
    loop_s = time.process_time() - start
    assert np.allclose(looped, ours)

    plain = weights[: args.plain_resamples]
    start = time.process_time()
    plain_f1 = []
    for w in plain:
        summed = sum(score_episode(*pairs[e], matcher) * k for e, k in enumerate(w) if k)
        plain_f1.append(float(metrics_from_counts(np.asarray(summed))["seg_f1_50"]))
    plain_s = (time.process_time() - start) / len(plain) * args.resamples
    assert np.allclose(plain_f1, ours[: len(plain)])

    print(f"{args.episodes} episodes, {int(counts[:, 2].sum())} gold and {int(counts[:, 1].sum())} predicted segments")
    print(f"{'matcher':<16}{'IoU >=':>7}{'matches':>9}{'F1':>8}{'sum IoU':>10}{'CPU s':>8}")
    for name, thr, m, f1, tot, sec in rows:
        print(f"{name:<16}{thr:>7.2f}{m:>9}{f1:>8.4f}{tot:>10.1f}{sec:>8.3f}")
    print(f"{'300-span episode, per connected group':<40}{grouped_s:>8.3f} s")
    print(f"{'300-span episode, one 300x300 matrix':<40}{whole_s:>8.3f} s  "
          f"({whole_s / max(grouped_s, 1e-9):,.0f}x slower)")
    print(f"{'scoring, all metrics':<40}{score_s:>8.3f} s  ({args.episodes / score_s:,.0f} episodes/s)")
    print(f"{'bootstrap, ' + str(args.resamples) + ' resamples, summed counts':<40}{boot_s:>8.3f} s")
    print(f"{'bootstrap, loop over cached counts':<40}{loop_s:>8.3f} s  ({loop_s / max(boot_s, 1e-9):,.0f}x slower)")
    print(f"{'bootstrap, re-scoring (extrapolated)':<40}{plain_s:>8.1f} s  "
          f"({plain_s / max(boot_s, 1e-9):,.0f}x slower)")
    gain = {thr: rows[2 * k + 1][2] - rows[2 * k][2] for k, thr in enumerate((0.1, 0.25, 0.5))}
    print(
        f"RESULT episodes={args.episodes} extra_matches_iou10={gain[0.1]} extra_matches_iou25={gain[0.25]} "
        f"extra_matches_iou50={gain[0.5]} score_eps_per_s={args.episodes / score_s:.0f} "
        f"long_episode_s={grouped_s:.3f} long_episode_one_matrix_s={whole_s:.3f} "
        f"bootstrap_s={boot_s:.4f} loop_bootstrap_s={loop_s:.3f} rescoring_bootstrap_s={plain_s:.1f}"
    )


if __name__ == "__main__":
    main()
