"""Runtime speed: control-loop tick overhead and dispatch jitter at 30 and 50 Hz (scripted stack, wall
clock, with and without recording), the simulator's steps/s with and without rendering, and evaluation throughput.

With `--policy CKPT` (a weak policy: e.g. 200 training steps), also the weak policy evaluation: 4
episodes of at most 30 simulated seconds per stack (policy / policy, policy / scripted, scripted /
policy with one worker, after a warm-up episode that loads the policy; policy / policy through
`steerable run` with one worker per core, loading included), in wall seconds per simulated
episode-second. The process keeps torch's default threads, as `steerable run` does.

Usage: .venv/bin/python benchmarks/runtime.py [--seconds 4] [--episodes 50] [--policy CKPT [--policy_only]]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from steerable.runtime.evaluation import evaluate
from steerable.runtime.loop import LoopRates, Runtime
from steerable.runtime.recording import Recorder
from steerable.runtime.stack import StackSpec
from steerable.synthetic import ScriptedController, ScriptedPlanner, SimEnv
from steerable.tools import load_tools

TASK = "put the red cube in the left bin, then the orange cube in the right bin"


def _pct(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values) * 1000.0, q)) if values else float("nan")


def loop_timing(hz: float, seconds: float, record: bool) -> dict[str, float]:
    """Run the scripted stack on the wall clock at `hz`; tick work and start lateness in ms.

    With `record`, both cameras are rendered every tick and kept by a `Recorder` (its encoding at the
    end is not part of the ticks).
    """
    env = SimEnv(fps=int(hz))
    env.reset(7, TASK)
    rt = Runtime(env, ScriptedController(int(hz)), ScriptedPlanner(), tools=load_tools({}),
                 rates=LoopRates(ctrl_hz=hz, chunk_hz=5, high_level_hz=1), realtime=True, render=record,
                 keep_timings=True)
    with tempfile.TemporaryDirectory() as tmp:
        recorder = Recorder(Path(tmp) / "rec", fps=int(hz), state_names=env.state_names) if record else None
        if recorder is not None:
            rt.listeners.append(recorder.on_event)
            rt.frame_hooks.append(recorder.on_frame)
        rt.submit("task", TASK)
        started = time.perf_counter()
        rt.run(max_ticks=int(hz * seconds))
        wall = time.perf_counter() - started
        if recorder is not None:
            recorder.close()
    return {
        "tick_p50": _pct(rt.stats.tick_seconds, 50),
        "tick_p99": _pct(rt.stats.tick_seconds, 99),
        "late_p50": _pct(rt.stats.lateness, 50),
        "late_p99": _pct(rt.stats.lateness, 99),
        "achieved_hz": rt.stats.ticks / wall,
    }


def sim_steps(render: bool, steps: int = 600) -> float:
    env = SimEnv()
    env.reset(3)
    rng = np.random.default_rng(0)
    targets = rng.uniform([0.05, 0.05, 0.02, 0.0], [0.5, 0.35, 0.15, 1.0], size=(steps, 4))
    started = time.perf_counter()
    for a in targets:
        env.send_action(a)
        env.observe(render=render)
    return steps / (time.perf_counter() - started)


def weak_policy_eval(checkpoint: str, episodes: int = 4,
                     max_seconds: float = 30.0) -> list[tuple[str, int, float, float]]:
    """Each stack's evaluation of the policy at `checkpoint`: (stack, workers, wall seconds, simulated
    episode-seconds)."""
    from steerable.policy.checkpoint import trained_on

    difficulty = str(trained_on(checkpoint).get("synthetic_difficulty") or "easy")
    rows: list[tuple[str, int, float, float]] = []
    for high, low in (("policy", "policy"), ("policy", "scripted"), ("scripted", "policy")):
        spec = StackSpec(high, low, policy_path=checkpoint, observation="privileged")
        evaluate(spec, 1, max_seconds=1, workers=1, difficulty=difficulty)  # warm-up: loads the policy
        started = time.perf_counter()
        report = evaluate(spec, episodes, max_seconds=max_seconds, workers=1, difficulty=difficulty)
        wall = time.perf_counter() - started
        rows.append((f"{high} / {low}", 1, wall, sum(e.sim_seconds for e in report.episodes)))
    # One worker per core, as `steerable run` starts them (each worker loads the policy: included). A
    # separate process: a fork of this one, which ran torch on several threads, may hang in OpenMP.
    cores = os.cpu_count() or 1
    done = subprocess.run(
        [sys.executable, "-m", "steerable.cli.main", "run", "--env", "sim", "--high_level", "policy", "--low_level",
         "policy", "--policy.path", checkpoint, "--observation", "privileged", "--eval_episodes", str(episodes),
         "--max_seconds", str(max_seconds), "--workers", str(cores), "--json"],
        capture_output=True, text=True, check=True)
    data = json.loads(done.stdout)
    rows.append(("policy / policy", cores, float(data["wall_seconds"]), float(data["mean_sim_seconds"]) * episodes))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--episodes", type=int, default=50)
    parser.add_argument("--policy", default=None, help="a (weak) policy checkpoint: adds the weak policy evaluation")
    parser.add_argument("--policy_only", action="store_true", help="with --policy: only the weak policy evaluation")
    args = parser.parse_args()
    if args.policy:
        print(f"weak policy evaluation ({args.policy}), 4 episodes x at most 30 simulated s, load {os.getloadavg()}:")
        weak = weak_policy_eval(args.policy)
        for stack, workers, wall, sim in weak:
            print(f"  {stack:>19}, {workers} worker(s): {wall:6.1f} s wall for {sim:5.1f} simulated episode-s "
                  f"= {wall / max(sim, 1e-9):.3f} s per simulated episode-second")
        worst = max(wall / sim for _, _, wall, sim in weak if sim >= 10)  # policy / scripted ends at once
        print(f"RESULT weak_eval_s_per_sim_s_max={worst:.3f}")
        if args.policy_only:
            return

    rows = []
    for hz in (30.0, 50.0):
        for record in (False, True):
            rows.append((hz, record, loop_timing(hz, args.seconds, record)))
    print(f"{'rate':>6} {'record':>6} | {'tick p50 ms':>11} {'tick p99 ms':>11} | {'jitter p50 ms':>13} "
          f"{'jitter p99 ms':>13} | {'achieved Hz':>11}")
    for hz, record, r in rows:
        print(f"{hz:6.0f} {('yes' if record else 'no'):>6} | {r['tick_p50']:11.3f} {r['tick_p99']:11.3f} | "
              f"{r['late_p50']:13.3f} {r['late_p99']:13.3f} | {r['achieved_hz']:11.1f}")
    off, on = sim_steps(False), sim_steps(True)
    print(f"\nsimulator steps/s: rendering off {off:,.0f}   rendering on (top + wrist) {on:,.0f}   "
          f"({off / on:.1f}x); real time at 15 fps = 15 steps/s")
    started = time.perf_counter()
    plain = evaluate(StackSpec(), args.episodes, seed=0)
    corrected = evaluate(StackSpec(), args.episodes, seed=0, interjections=True)
    eval_s = time.perf_counter() - started
    sim_seconds = sum(e.sim_seconds for e in plain.episodes + corrected.episodes)
    print(f"evaluation, scripted stack, {args.episodes} episodes each: success {plain.success_rate:.0%} without, "
          f"{corrected.success_rate:.0%} with interjections; {sim_seconds:.0f} s simulated in {eval_s:.1f} s wall "
          f"({sim_seconds / eval_s:.0f}x real time)")
    r30, r50, rec50 = rows[0][2], rows[2][2], rows[3][2]
    print(
        f"RESULT tick_p50_ms_30hz={r30['tick_p50']:.3f} tick_p99_ms_30hz={r30['tick_p99']:.3f} "
        f"jitter_p50_ms_30hz={r30['late_p50']:.3f} jitter_p99_ms_30hz={r30['late_p99']:.3f} "
        f"tick_p50_ms_50hz={r50['tick_p50']:.3f} tick_p99_ms_50hz={r50['tick_p99']:.3f} "
        f"jitter_p50_ms_50hz={r50['late_p50']:.3f} jitter_p99_ms_50hz={r50['late_p99']:.3f} "
        f"tick_p99_ms_50hz_recording={rec50['tick_p99']:.3f} jitter_p99_ms_50hz_recording={rec50['late_p99']:.3f} "
        f"sim_steps_s_render_off={off:.0f} sim_steps_s_render_on={on:.0f} "
        f"eval_success={plain.success_rate:.3f} eval_success_interjections={corrected.success_rate:.3f} "
        f"eval_x_realtime={sim_seconds / eval_s:.0f}"
    )


if __name__ == "__main__":
    main()
