"""Benchmark: are the synthetic data executable? Recorded actions replayed from each episode's own scene.

Per difficulty, a dataset of EPISODES episodes is written to disk (`generate_synthetic`, oracle-language
interjection rate 0.5, the wrist camera only: the cameras do not change the actions), then every
episode's stored `action` column is sent to the simulator one action per step from its rebuilt
initial scene (`steerable run --replay`, `steerable.synthetic.replay`). The table gives the
recorded successes, how many the replay reproduced (with the 95 % Wilson interval), how far each
episode's farthest cube ended from where the recording left it, and the replay speed. A second table shows the one place
where a stored action is not the pose that led to the next stored frame: after a lost control tick
(a loop stall, realistic 1 %, hard 3 %), the action commands the lost tick's pose, one tick behind
the next frame's. Ends with a RESULT line.

    .venv/bin/python benchmarks/replay.py [--episodes 50] [--seed 0]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from steerable.synthetic import generate_synthetic, record_episode
from steerable.synthetic.replay import ReplayReport, open_replay, wilson_interval

LEVELS = ("easy", "realistic", "hard")
FPS = 15


def replay_level(root: Path, level: str, episodes: int, seed: int) -> tuple[ReplayReport, int, float, float]:
    """(report, frames, seconds to generate, seconds to replay) for one difficulty."""
    started = time.perf_counter()
    generate_synthetic(root / level, episodes=episodes, cameras=("wrist",), seed=seed, fps=FPS, difficulty=level,
                       interjection_rate=0.5, camera_shapes="legacy")
    generated = time.perf_counter()
    replay = open_replay(root / level)
    report = replay.run()
    replayed = time.perf_counter()
    frames = sum(r.frames for r in report.results)
    return report, frames, generated - started, replayed - generated


def stall_lag(level: str, episodes: int, seed: int) -> tuple[int, int, float, float]:
    """(frames, frames after a lost tick, median and largest lag in mm of the action there)."""
    frames, lags = 0, []
    for ep in range(episodes):
        _task, rec, _truth = record_episode(seed, ep, FPS, level, 0.5)
        commands = np.asarray(rec.demo.commands, dtype=np.float32)
        lost = np.diff(rec.ticks) > 1
        gap = np.linalg.norm(rec.action[:-1, :3] - commands[rec.ticks[1:], :3], axis=1)
        frames += len(rec.ticks)
        lags.extend(gap[lost].tolist())
    if not lags:
        return frames, 0, 0.0, 0.0
    return frames, len(lags), float(np.median(lags)) * 1000, float(np.max(lags)) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rows, result = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        for level in LEVELS:
            report, frames, gen_s, replay_s = replay_level(Path(tmp), level, args.episodes, args.seed)
            n, k = report.recorded_successes, report.reproduced_successes
            low, high = wilson_interval(k, n)
            errors = [r.max_error for r in report.results]  # each episode's farthest cube
            rows.append([
                level, str(len(report.results)), str(frames), str(n), str(k),
                f"{k / n:.3f}" if n else "-", f"{low:.3f}-{high:.3f}",
                f"{np.median(errors) * 1000:.1f}", f"{max(errors) * 1000:.1f}",
                f"{frames / replay_s:,.0f}", f"{gen_s:.0f}",
            ])
            result[level] = (k / n if n else float("nan"), low, max(errors) * 1000)
            for r in report.results:
                if not r.reproduced:
                    print("  not reproduced:", r.why())
    header = ["difficulty", "episodes", "frames", "recorded successes", "reproduced", "rate", "95 % Wilson",
              "worst cube: median mm", "max mm", "replay frames/s", "generate s"]
    _table(header, rows)
    print()
    lag_rows = []
    for level in LEVELS:
        frames, lost, median, worst = stall_lag(level, args.episodes, args.seed)
        lag_rows.append([level, str(frames), str(lost), f"{100 * lost / frames:.2f} %", f"{median:.1f}",
                         f"{worst:.1f}"])
    _table(["difficulty", "frames", "frames after a lost tick", "share", "action lag median mm", "max mm"], lag_rows)
    print(
        "RESULT " + " ".join(f"replay_{level}={rate:.3f}" for level, (rate, _, _) in result.items())
        + f" min_low95={min(low for _, low, _ in result.values()):.3f}"
        + f" max_cube_error_mm={max(err for _, _, err in result.values()):.1f} episodes_per_level={args.episodes}"
    )


def _table(header: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    print("  ".join(h.rjust(w) for h, w in zip(header, widths, strict=True)))
    for row in rows:
        print("  ".join(cell.rjust(w) for cell, w in zip(row, widths, strict=True)))


if __name__ == "__main__":
    main()
