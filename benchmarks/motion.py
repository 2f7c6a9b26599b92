"""Benchmark of the no-model motion annotator against the synthetic dataset's ground truth.

Table 1 (`easy` datasets written to disk and read back, per seed and overall): keystate
precision/recall/F1 against the true gripper events; heuristic subtasks (fine and coarse) against
the true subtask spans, beside a uniform split that is told the true number of subtasks; boundary
MAE of a scripted "VLM" whose boundaries are the true ones jittered by up to +-JITTER seconds,
before and after snapping to keystates; and episodes per second of the motion annotator.

Table 2 (difficulty levels, episodes simulated and recorded in memory exactly as `make-dataset`
stores them): coarse heuristic subtasks scored with `steerable.eval` (segment F1 at IoU
0.25/0.5/0.75 with optimal matching, boundary F1 within +-0.5 s, boundary error, over-segmentation)
for keystates alone ("keys") and keystates plus the hand's path ("path", the annotator's default),
side by side. The path thresholds were tuned on `realistic` with the TUNE seeds; the HELD-OUT
seeds, and every `hard` row, were not looked at while tuning. "hard-basic" is `hard` without its
hard-only nuisances (re-grips, long transport stops, nudges, chained subtasks, gripper sensor
glitches), to show what they cost. Ends with a RESULT line.

    .venv/bin/python benchmarks/motion.py [--episodes 20] [--seeds 0 1] [--jitter 0.6] [--tolerance 0.6]
        [--level_episodes 20] [--tune_seeds 0 1 2] [--heldout_seeds 100 101 102 103 104]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from steerable.annotate.modules.motion import MotionConfig
from steerable.dataset import open_dataset
from steerable.dataset.frames import feature_matrix
from steerable.eval.gold import Segment
from steerable.eval.labels import make_label_matcher
from steerable.eval.metrics import boundary_mae, event_precision_recall, segmentation_f1, spans_from_starts
from steerable.eval.report import evaluate_segments
from steerable.motion import (
    MotionParams,
    detect_keystates,
    find_dims,
    heuristic_subtasks,
    motion_rows,
    snap_boundaries,
)
from steerable.synthetic import generate_synthetic, read_ground_truth, record_episode
from steerable.synthetic.difficulty import HARD, Difficulty
from steerable.synthetic.generate import STATE_NAMES

EVENT_TOLERANCE_S = 0.25
# Sensor noise of the "+noise" row: 3 mm on ee.x/y/z, 3 % of the range on gripper.pos.
NOISE_STD = np.array([0.003, 0.003, 0.003, 0.03])


@dataclass
class Tally:
    """Sums over episodes; ratios are formed at the end."""

    matched: int = 0
    predicted: int = 0
    true: int = 0
    seg: dict[str, list[float]] = field(default_factory=dict)
    mae: dict[str, list[float]] = field(default_factory=dict)
    episodes: int = 0
    seconds: float = 0.0

    def add(self, other: Tally) -> None:
        self.matched += other.matched
        self.predicted += other.predicted
        self.true += other.true
        for name, values in other.seg.items():
            self.seg.setdefault(name, []).extend(values)
        for name, values in other.mae.items():
            self.mae.setdefault(name, []).extend(values)
        self.episodes += other.episodes
        self.seconds += other.seconds

    def row(self, label: str) -> list[str]:
        p = self.matched / self.predicted if self.predicted else 1.0
        r = self.matched / self.true if self.true else 1.0
        f = 2 * p * r / (p + r) if p + r else 0.0
        cells = [label, f"{p:.3f}", f"{r:.3f}", f"{f:.3f}"]
        cells += [f"{np.mean(self.seg[k]):.3f}" for k in SEG_COLUMNS]
        cells += [f"{np.mean(self.mae[k]):.2f}" for k in MAE_COLUMNS]
        cells.append(f"{self.episodes / self.seconds:.0f}")
        return cells


SEG_COLUMNS = ("fine", "coarse", "uniform")
MAE_COLUMNS = ("coarse", "uniform", "jittered", "snap all", "snapped")
KINDS = ("gripper_close", "gripper_open", "pause")
HEADER = [
    "seed",
    "key P",
    "key R",
    "key F1",
    "F1 fine",
    "F1 coarse",
    "F1 unif",
    "MAE coarse",
    "MAE unif",
    "MAE jit",
    "MAE snap all",
    "MAE snap",
    "ep/s",
]


def evaluate(
    root: Path, params: MotionParams, jitter: float, tolerance: float, seed: int, noise: float
) -> Tally:
    """Score every episode of one synthetic dataset, after adding sensor noise of `noise` x NOISE_STD."""
    ds = open_dataset(root)
    truth = read_ground_truth(root)
    stats = json.loads((root / "meta" / "stats.json").read_text())
    dims = find_dims(ds.features, params, stats)
    rng = np.random.default_rng(seed + 1000)
    noise_rng = np.random.default_rng(seed + 2000)
    tally = Tally()
    for ep in ds.episodes:
        gt = truth[ep.episode_index]
        table = ds.read_episode(ep.episode_index, ["timestamp", dims.state_key or ""])
        ts = feature_matrix(table, "timestamp")[:, 0]
        state = feature_matrix(table, dims.state_key or "").astype(np.float64)
        state += noise_rng.normal(0.0, 1.0, size=state.shape) * NOISE_STD * noise
        start = time.perf_counter()
        keystates = detect_keystates(ts, state, dims, params)
        motion_rows(ts, state, dims, params)
        rows = {
            g: heuristic_subtasks(
                ts, keystates, gt.task, granularity=g, state=state, dims=dims, params=params
            )
            for g in ("fine", "coarse")
        }
        tally.seconds += time.perf_counter() - start
        tally.episodes += 1
        for kind in ("close", "open"):
            pred = [k.time for k in keystates if k.kind == f"gripper_{kind}"]
            true = [e.time for e in gt.gripper_events if e.kind == kind]
            score = event_precision_recall(pred, true, EVENT_TOLERANCE_S)
            tally.matched += score.matched
            tally.predicted += len(pred)
            tally.true += len(true)
        end = float(ts[-1])
        true_spans = [(s.start, s.end) for s in gt.subtasks]
        true_cuts = [s.start for s in gt.subtasks[1:]]
        for g, r in rows.items():
            spans = spans_from_starts([x["timestamp"] for x in r], end)
            tally.seg.setdefault(g, []).append(segmentation_f1(spans, true_spans).f1)
        uniform_starts = [float(t) for t in np.linspace(0.0, end, len(true_spans) + 1)[:-1]]
        uniform = spans_from_starts(uniform_starts, end)
        tally.seg.setdefault("uniform", []).append(segmentation_f1(uniform, true_spans).f1)
        tally.mae.setdefault("uniform", []).append(boundary_mae(uniform_starts[1:], true_cuts))
        tally.mae.setdefault("coarse", []).append(
            boundary_mae([x["timestamp"] for x in rows["coarse"][1:]], true_cuts)
        )
        jittered = [float(np.clip(b + rng.uniform(-jitter, jitter), 0.0, end)) for b in true_cuts]
        every_kind = snap_boundaries(jittered, keystates, tolerance, ts, kinds=KINDS)
        snapped = snap_boundaries(jittered, keystates, tolerance, ts)
        tally.mae.setdefault("jittered", []).append(boundary_mae(sorted(jittered), true_cuts))
        tally.mae.setdefault("snap all", []).append(boundary_mae(every_kind, true_cuts))
        tally.mae.setdefault("snapped", []).append(boundary_mae(snapped, true_cuts))
    return tally


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=20)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--jitter", type=float, default=0.6)
    parser.add_argument("--tolerance", type=float, default=0.6)
    parser.add_argument("--config", type=str, default="{}", help="--motion.* settings (MotionConfig) as JSON")
    parser.add_argument("--level_episodes", type=int, default=20, help="episodes per seed in table 2")
    parser.add_argument("--tune_seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--heldout_seeds", type=int, nargs="+", default=[100, 101, 102, 103, 104])
    args = parser.parse_args()
    # The synthetic gripper.pos is 0 = open .. 1 = closed, the reverse of most real arms.
    params = MotionConfig(**{"gripper_closed_is_high": True, **json.loads(args.config)}).params()
    total, noisy = Tally(), Tally()
    lines = [HEADER]
    with tempfile.TemporaryDirectory() as tmp:
        for seed in args.seeds:
            root = generate_synthetic(
                Path(tmp) / f"seed{seed}", episodes=args.episodes, cameras=("top",), seed=seed
            )
            tally = evaluate(root, params, args.jitter, args.tolerance, seed, noise=0.0)
            total.add(tally)
            lines.append(tally.row(str(seed)))
            noisy.add(evaluate(root, params, args.jitter, args.tolerance, seed, noise=1.0))
    lines.append(total.row("all"))
    lines.append(noisy.row("all+noise"))
    widths = [max(len(line[i]) for line in lines) for i in range(len(HEADER))]
    for line in lines:
        print("  ".join(cell.rjust(w) for cell, w in zip(line, widths, strict=True)))
    final = dict(zip(HEADER, total.row("all"), strict=True))
    print(
        f"\nkeystates vs gripper events within {EVENT_TOLERANCE_S} s; segment F1 at IoU 0.5; "
        f"jitter +-{args.jitter} s, snap tolerance {args.tolerance} s; {total.episodes} episodes; "
        f"+noise adds {NOISE_STD.tolist()} std to (ee.x, ee.y, ee.z, gripper.pos)\n"
    )
    levels = level_table(params, args.level_episodes, args.tune_seeds, args.heldout_seeds)
    print(
        f"RESULT keystate_precision={final['key P']} keystate_recall={final['key R']} keystate_f1={final['key F1']} "
        f"seg_f1_fine={final['F1 fine']} seg_f1_coarse={final['F1 coarse']} seg_f1_uniform={final['F1 unif']} "
        f"boundary_mae_coarse={final['MAE coarse']} boundary_mae_uniform={final['MAE unif']} "
        f"mae_jittered={final['MAE jit']} mae_snapped_all_kinds={final['MAE snap all']} "
        f"mae_snapped={final['MAE snap']} "
        f"episodes_per_s={final['ep/s']} noisy_keystate_f1={noisy.row('')[3]} noisy_mae_snapped={noisy.row('')[-2]} "
        + " ".join(f"{k}={v:.3f}" for k, v in levels.items())
    )


LEVEL_METRICS = (
    ("seg_f1_25", "F1@.25"),
    ("seg_f1_50", "F1@.5"),
    ("seg_f1_75", "F1@.75"),
    ("boundary_f1", "bound F1"),
    ("boundary_error_s", "bound err s"),
    ("over_segmentation", "over-seg"),
)
# `hard` without its hard-only nuisances (re-grips while carrying, long transport stops, nudges after
# release, chained subtasks, gripper sensor glitches): what `hard` was before them, for the comparison.
HARD_BASIC = replace(
    HARD,
    name="hard-basic",
    regrip_rate=0.0,
    transport_pause_rate=0.0,
    nudge_rate=0.0,
    chain_rate=0.0,
    gripper_glitch_rate=0.0,
)
EXTRA_LEVELS: dict[str, Difficulty] = {HARD_BASIC.name: HARD_BASIC}
# (level, seed set, share of episodes with a spoken redirect mid-placement)
LEVEL_ROWS = (
    ("easy", "tune", 0.0),
    ("realistic", "tune", 0.0),
    ("realistic", "held-out", 0.0),
    ("hard-basic", "held-out", 0.0),
    ("hard", "held-out", 0.0),
    ("realistic", "held-out", 0.5),
)


def level_scores(
    level: str, seeds: list[int], episodes: int, params: MotionParams, redirects: float = 0.0
) -> tuple[dict[str, dict[str, float]], float]:
    """steerable.eval metrics of the coarse heuristic, keystates only vs with the path; keystate F1."""
    features = {"observation.state": {"dtype": "float32", "shape": [4], "names": STATE_NAMES}}
    dims = find_dims(features, params, None)
    pred: dict[str, dict[int, list[Segment]]] = {"keys": {}, "path": {}}
    gold: dict[int, list[Segment]] = {}
    matched = predicted = true = 0
    for seed in seeds:
        for ep in range(episodes):
            task, rec, truth = record_episode(seed, ep, 15, EXTRA_LEVELS.get(level, level), redirects)
            ts = (np.arange(len(rec.ticks)) / 15).astype(np.float32)
            state = rec.state.astype(np.float64)
            keystates = detect_keystates(ts, state, dims, params)
            key = seed * 10_000 + ep
            gold[key] = [Segment(s.start, s.end, s.text) for s in truth.subtasks]
            for method, extra in (("keys", {}), ("path", {"state": state, "dims": dims, "params": params})):
                rows = heuristic_subtasks(ts, keystates, task.text, granularity="coarse",
                                          **extra)  # type: ignore[arg-type]
                spans = spans_from_starts([r["timestamp"] for r in rows], float(ts[-1]))
                pred[method][key] = [
                    Segment(a, b, r["content"]) for (a, b), r in zip(spans, rows, strict=True)
                ]
            for kind in ("close", "open"):
                p = [k.time for k in keystates if k.kind == f"gripper_{kind}"]
                t = [e.time for e in truth.gripper_events if e.kind == kind]
                matched += event_precision_recall(p, t, EVENT_TOLERANCE_S).matched
                predicted, true = predicted + len(p), true + len(t)
    matcher = make_label_matcher("normalized")
    scores = {m: evaluate_segments(pred[m], gold, matcher, resamples=0).metrics for m in pred}
    return scores, 2 * matched / (predicted + true) if predicted + true else 1.0


def level_table(params: MotionParams, episodes: int, tune: list[int], heldout: list[int]) -> dict[str, float]:
    """Print table 2; return the figures for the RESULT line."""
    header = ["level", "seeds", "key F1"]
    for _, title in LEVEL_METRICS:
        header += [f"{title} keys", f"{title} path"]
    lines = [header]
    result: dict[str, float] = {}
    for level, which, redirects in LEVEL_ROWS:
        seeds = tune if which == "tune" else heldout
        scores, key_f1 = level_scores(level, seeds, episodes, params, redirects)
        name = f"{level}+redirects" if redirects else level
        line = [name, f"{which} {','.join(map(str, seeds))}", f"{key_f1:.3f}"]
        for metric, _ in LEVEL_METRICS:
            line += [f"{scores['keys'][metric]:.3f}", f"{scores['path'][metric]:.3f}"]
        lines.append(line)
        tag = f"{level.replace('-', '_')}_{which.replace('-', '')}" + ("_redirects" if redirects else "")
        for method in ("keys", "path"):
            for metric in ("seg_f1_50", "boundary_f1", "boundary_error_s"):
                result[f"{tag}_{metric}_{method}"] = scores[method][metric]
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    for line in lines:
        print("  ".join(cell.rjust(w) for cell, w in zip(line, widths, strict=True)))
    print(
        f"\ncoarse heuristic subtasks vs true spans, steerable.eval metrics (optimal matching; boundary F1 "
        f"within +-0.5 s); {episodes} episodes per seed; keys = keystates only, path = + the hand's path; "
        "+redirects: half the episodes have a spoken redirect mid-placement (a true boundary with no "
        "gripper event, as in --with_language datasets)"
    )
    return result


if __name__ == "__main__":
    main()
