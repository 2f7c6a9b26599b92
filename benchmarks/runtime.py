"""Runtime speed: control-loop tick overhead and dispatch jitter at 30 and 50 Hz (scripted stack, wall
clock, with and without recording), the simulator's steps/s with and without rendering, and evaluation throughput.

With `--policy CKPT` (a weak policy: e.g. 200 training steps), also the weak policy evaluation: 4
episodes of at most 30 simulated seconds per stack (policy / policy, policy / scripted, scripted /
policy with one worker, after a warm-up episode that loads the policy; policy / policy through
`steerable run` with one worker per core, loading included), in wall seconds per simulated
episode-second. The process keeps torch's default threads, as `steerable run` does.

With `--lerobot [CKPT]` (run it with .venv-lerobot's Python: it imports `lerobot`), also the control
loop driving a real LeRobot ACT policy (`--low_level lerobot`) in the simulator on the wall clock at
15 and 30 Hz: tick work, dispatch jitter and the rate achieved, with ACT's action queue and with its
temporal ensembling (an inference on every tick). CKPT: a LeRobot checkpoint folder; without one, an
ACT at LeRobot's default size (random weights) is built by LeRobot's factory from a one-episode
synthetic dataset (with the tests' `tests/lerobot/lerobot_policies.py`).

Then chunk inference, sync vs async vs rtc (`steerable run --inference`, `benchmarks/runtime_chunks.py`):
a flow policy whose chunk takes 100 or 300 ms at 30 and 50 Hz (jitter, dry ticks, jumps at chunk
boundaries and within), and success over 50 seeds with chunks slowed to 200 ms (with
`--chunks_policy CKPT`, also over the learned low level). `--chunks_only`: this part alone.

Usage: .venv/bin/python benchmarks/runtime.py [--seconds 4] [--episodes 50] [--policy CKPT [--policy_only]]
       .venv/bin/python benchmarks/runtime.py --chunks_only [--chunks_policy CKPT] [--chunks_seconds 20]
       .venv-lerobot/bin/python benchmarks/runtime.py --lerobot [CKPT] [--lerobot_only]
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


def _lerobot_act(work: Path, **config: object) -> Path:
    """An ACT at LeRobot's default size (random weights; `config` on top), saved as a trained checkpoint."""
    import torch

    threads = torch.get_num_threads()
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "lerobot"))
    from lerobot_policies import save_policy, synthetic_dataset  # the tests' builder: LeRobot's own factory

    torch.set_num_threads(threads)  # the helpers pin the tests to one thread; keep steerable run's default
    dataset = work / "dataset"
    if not dataset.exists():
        synthetic_dataset(dataset)
    defaults = {"chunk_size": 100, "n_action_steps": 100, "dim_model": 512, "n_heads": 8, "dim_feedforward": 3200,
                "n_encoder_layers": 4, "n_decoder_layers": 1, "latent_dim": 32, "n_vae_encoder_layers": 4}
    name = "act_te" if config.get("temporal_ensemble_coeff") else "act"
    return save_policy("act", dataset, work / name, **{**defaults, **config})


def lerobot_loop_timing(checkpoint: Path, hz: float, seconds: float) -> dict[str, float]:
    """`--high_level none --low_level lerobot` on the wall clock at `hz` (cameras rendered every tick, as
    the policy reads them): tick work and lateness in ms, the rate achieved, model inferences run."""
    from steerable.runtime.stack import build_low

    env = SimEnv(fps=int(hz))
    env.reset(7, TASK)
    low = build_low(StackSpec(high_level="none", low_level="lerobot", lerobot={"policy_path": str(checkpoint)}), env)
    model = low.policy  # type: ignore[attr-defined]
    predict, inferences = model.predict_action_chunk, [0]

    def counted(*args: object, **kwargs: object) -> object:
        inferences[0] += 1
        return predict(*args, **kwargs)

    low.act(env.observe(), TASK)  # torch's first call is slow (warm-up): outside the timings
    low.reset()
    model.predict_action_chunk = counted
    rt = Runtime(env, low, None, rates=LoopRates(ctrl_hz=hz, chunk_hz=5, high_level_hz=1), realtime=True,
                 keep_timings=True)
    rt.submit("task", TASK)
    started = time.perf_counter()
    rt.run(max_ticks=int(hz * seconds))
    wall = time.perf_counter() - started
    rt.close()
    return {
        "tick_p50": _pct(rt.stats.tick_seconds, 50),
        "tick_p99": _pct(rt.stats.tick_seconds, 99),
        "late_p50": _pct(rt.stats.lateness, 50),
        "late_p99": _pct(rt.stats.lateness, 99),
        "achieved_hz": rt.stats.ticks / wall,
        "inferences": float(inferences[0]),
    }


def lerobot_section(checkpoint: str, seconds: float) -> None:
    """The LeRobot table and its RESULT line (see the module docstring)."""
    import torch

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        policies = ([("ACT (given)", Path(checkpoint))] if checkpoint else
                    [("ACT, queue of 100", _lerobot_act(work)),
                     ("ACT, temporal ensembling", _lerobot_act(work, n_action_steps=1, temporal_ensemble_coeff=0.01))])
        print(f"LeRobot policy as the low level, {seconds:g} s per row on the wall clock, torch threads "
              f"{torch.get_num_threads()}, load {os.getloadavg()}:")
        print(f"{'policy':>26} {'rate':>5} | {'tick p50 ms':>11} {'tick p99 ms':>11} | {'jitter p50 ms':>13} "
              f"{'jitter p99 ms':>13} | {'achieved Hz':>11} | {'inferences':>10}")
        results = {}
        for label, path in policies:
            for hz in (15.0, 30.0):
                r = lerobot_loop_timing(path, hz, seconds)
                results[label, hz] = r
                print(f"{label:>26} {hz:5.0f} | {r['tick_p50']:11.3f} {r['tick_p99']:11.3f} | {r['late_p50']:13.3f} "
                      f"{r['late_p99']:13.3f} | {r['achieved_hz']:11.1f} | {r['inferences']:10.0f}")
    first = policies[0][0]
    q15, q30 = results[first, 15.0], results[first, 30.0]
    line = (f"RESULT lerobot_act_tick_p50_ms_15hz={q15['tick_p50']:.3f} "
            f"lerobot_act_tick_p99_ms_15hz={q15['tick_p99']:.3f} "
            f"lerobot_act_jitter_p99_ms_15hz={q15['late_p99']:.3f} lerobot_act_hz_15hz={q15['achieved_hz']:.1f} "
            f"lerobot_act_jitter_p99_ms_30hz={q30['late_p99']:.3f} lerobot_act_hz_30hz={q30['achieved_hz']:.1f}")
    if len(policies) > 1:
        e15, e30 = results[policies[1][0], 15.0], results[policies[1][0], 30.0]
        line += (f" lerobot_act_ensembled_tick_p50_ms_15hz={e15['tick_p50']:.3f} "
                 f"lerobot_act_ensembled_hz_15hz={e15['achieved_hz']:.1f} "
                 f"lerobot_act_ensembled_hz_30hz={e30['achieved_hz']:.1f}")
    print(line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--episodes", type=int, default=50)
    parser.add_argument("--policy", default=None, help="a (weak) policy checkpoint: adds the weak policy evaluation")
    parser.add_argument("--policy_only", action="store_true", help="with --policy: only the weak policy evaluation")
    parser.add_argument("--lerobot", nargs="?", const="", default=None, metavar="CKPT",
                        help="adds the loop with a real LeRobot ACT policy (run with .venv-lerobot's Python)")
    parser.add_argument("--lerobot_only", action="store_true", help="with --lerobot: only the LeRobot table")
    parser.add_argument("--chunks_only", action="store_true", help="only the chunk inference part (sync/async/rtc)")
    parser.add_argument("--chunks_policy", default=None, help="a checkpoint: success with the learned low level too")
    parser.add_argument("--chunks_seconds", type=float, default=20.0, help="its episodes' simulated time limit")
    args = parser.parse_args()
    if args.chunks_only:
        from runtime_chunks import section

        section(args.seconds, args.episodes, args.chunks_policy, args.chunks_seconds)
        return
    if args.lerobot is not None:
        lerobot_section(args.lerobot, args.seconds)
        if args.lerobot_only:
            return
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
    from runtime_chunks import section

    section(args.seconds, args.episodes, args.chunks_policy, args.chunks_seconds)


if __name__ == "__main__":
    main()
