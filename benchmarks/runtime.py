"""Runtime speed: control-loop tick overhead and dispatch jitter at 30 and 50 Hz (scripted stack, wall
clock, with and without recording), the simulator's steps/s with and without rendering, and evaluation throughput.

Usage: .venv/bin/python benchmarks/runtime.py [--seconds 4] [--episodes 50]
"""

from __future__ import annotations

import argparse
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--episodes", type=int, default=50)
    args = parser.parse_args()

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
