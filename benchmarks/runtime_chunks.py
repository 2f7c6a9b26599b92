"""Chunk inference, sync vs async vs rtc (issue 23): the part of `benchmarks/runtime.py` that measures
`steerable run --inference`. Imported by runtime.py (running this file alone does nothing).

1. Timing, on the wall clock: a flow policy whose chunk takes 100 ms or 300 ms (slept to that), at
   30 and 50 Hz, for `seconds` each: dispatch jitter (how late each tick started), ticks that found
   the queue empty after the first action ("dry"), control periods in which no action went out for
   any reason (a dry queue, or a tick that started a period or more late: sync's inference blocks
   the tick; a loaded machine stalls the loop), and the largest jump between consecutive actions at
   chunk boundaries against within a chunk. The policy is `ToyFlowPolicy`: one second of
   actions following a slow reference, plus one random offset per chunk (many equally good chunks, as
   a multimodal policy has), sampled by integrating the exact flow velocity of that Gaussian; rtc
   guides it with `steerable.policy.rtc.PrefixGuidance`, the guidance the real policy gets.
2. Success in the simulator, 50 seeded episodes per mode, the policy slowed to 200 ms a chunk (the
   virtual clock simulates the latency, so these are deterministic): the scripted stack, and with a
   checkpoint the scripted planner over the learned low level (privileged state).
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np
import torch

from steerable.control import ActionChunk, ChunkPrefix, Observation
from steerable.policy.rtc import PrefixGuidance
from steerable.runtime.chunks import InferenceOptions
from steerable.runtime.evaluation import evaluate
from steerable.runtime.loop import LoopRates, Runtime
from steerable.runtime.stack import StackSpec

MODES = ("sync", "async", "rtc")


class ToyFlowPolicy:
    """A flow policy over (H, 1) chunks: mean = the reference r(t_obs + i / hz), covariance = a shared
    offset (sd `spread`) plus a little per-step noise; sampled in `steps` Euler steps of the exact
    velocity (see the module docstring). The flow runs on actions divided by the reference's standard
    deviation (`SCALE`), as a trained policy's runs on normalised actions."""

    SCALE = 0.5 / math.sqrt(2)

    name = "toy flow policy"
    wants_images = False

    def __init__(self, hz: float, horizon_s: float = 1.0, spread: float = 0.1, steps: int = 10, seed: int = 0) -> None:
        self.hz, self.steps = hz, steps
        self.h = int(round(hz * horizon_s))
        eye = torch.eye(self.h, dtype=torch.float64)
        self.cov = (spread / self.SCALE) ** 2 * torch.ones(self.h, self.h, dtype=torch.float64) + 1e-6 * eye
        self.eye = eye
        self.rng = torch.Generator().manual_seed(seed)

    @staticmethod
    def reference(t: np.ndarray) -> np.ndarray:
        return 0.5 * np.sin(2 * math.pi * 0.25 * t)

    def _velocity(self, mean: torch.Tensor, x: torch.Tensor, t: float) -> torch.Tensor:
        flat = x.reshape(x.shape[0], -1).double()
        gain = (1 - t) * self.cov @ torch.linalg.inv((1 - t) ** 2 * self.cov + t**2 * self.eye)
        clean = mean + (flat - (1 - t) * mean) @ gain.T
        return ((flat - clean) / t).reshape(x.shape).to(x.dtype)

    def _sample(self, observation: Observation, guide: PrefixGuidance | None) -> ActionChunk:
        times = observation.time_s + np.arange(self.h) / self.hz
        mean = torch.as_tensor(self.reference(times) / self.SCALE, dtype=torch.float64)
        x = torch.randn(1, self.h, 1, generator=self.rng)
        dt = -1.0 / self.steps
        for i in range(self.steps):
            t = 1.0 + i * dt
            if guide is None:
                v = self._velocity(mean, x, t)
            else:
                v = guide(x, torch.full((1,), t), lambda y, t=t: self._velocity(mean, y, t))
            x = x + dt * v
        return ActionChunk((x[0].numpy() * self.SCALE).astype(np.float32))

    def act(self, observation: Observation, command: str) -> ActionChunk:
        return self._sample(observation, None)

    def act_continuing(self, observation: Observation, command: str, prefix: ChunkPrefix) -> ActionChunk:
        m = min(len(prefix.actions), self.h)
        target, weights = torch.zeros(1, self.h, 1), torch.zeros(self.h)
        target[0, :m] = torch.as_tensor(prefix.actions[:m, :1] / self.SCALE)
        weights[:m] = torch.as_tensor(prefix.weights[:m])
        return self._sample(observation, PrefixGuidance(target, weights, prefix.max_guidance))

    def reset(self) -> None:
        pass


class _TrackEnv:
    """A robot that goes where it is told; records each action, when it was sent, and whether it began
    a new chunk (the runtime queued one since the last action)."""

    fps = 30
    action_dim = 1
    state_names = ("joint",)
    camera_keys = ()

    def __init__(self) -> None:
        self.rt: Runtime | None = None
        self.start = time.perf_counter()
        self.sent: list[tuple[float, float, bool]] = []
        self._queued = 0

    def observe(self, *, render: bool = True) -> Observation:
        last = self.sent[-1][1] if self.sent else 0.0
        return Observation(state=np.array([last], dtype=np.float32), time_s=time.perf_counter() - self.start)

    def send_action(self, action: np.ndarray) -> None:
        assert self.rt is not None
        queued = self.rt.chunks.stats.queued
        self.sent.append((time.perf_counter(), float(action[0]), queued != self._queued))
        self._queued = queued

    def close(self) -> None:
        pass


def _pct(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values) * 1000.0, q)) if values else float("nan")


def timing(mode: str, hz: float, latency_s: float, seconds: float) -> dict[str, float]:
    """One row of the timing table (see the module docstring)."""
    env = _TrackEnv()
    low = ToyFlowPolicy(hz)
    # Warm-up, not timed: the first guided call pays torch's autograd set-up (about a second, GIL held).
    low.act_continuing(env.observe(), "", ChunkPrefix(np.zeros((4, 1), np.float32), np.ones(4, np.float32), 2))
    rt = Runtime(env, low, None, rates=LoopRates(ctrl_hz=hz, chunk_hz=hz), realtime=True,  # type: ignore[arg-type]
                 keep_timings=True, inference=InferenceOptions(mode, min_latency_s=latency_s))
    env.rt = rt
    rt.submit("task", "follow the reference")
    empty = 0  # ticks, after the first action, that found nothing to dispatch (the queue ran dry)
    for _ in range(int(hz * seconds)):
        before = len(env.sent)
        rt.tick()
        empty += bool(before) and len(env.sent) == before
        rt.stats.lateness.append(rt.clock.wait_next())
    rt.close()
    at = np.array([s[0] for s in env.sent])
    values = np.array([s[1] for s in env.sent])
    starts = np.array([s[2] for s in env.sent])
    jumps = np.abs(np.diff(values))
    boundary, within = jumps[starts[1:]], jumps[~starts[1:]]
    periods = int(round((at[-1] - at[0]) * hz)) + 1 if len(at) else 0
    return {
        "late_p50": _pct(rt.stats.lateness, 50),
        "late_p99": _pct(rt.stats.lateness, 99),
        "dry": float(empty),
        "no_action": float(max(periods - len(at), 0)),
        "jump_boundary": float(boundary.max()) if len(boundary) else float("nan"),
        "jump_boundary_p50": float(np.median(boundary)) if len(boundary) else float("nan"),
        "jump_within": float(within.max()) if len(within) else float("nan"),
        "chunks": float(rt.chunks.stats.started),
    }


def success(spec: StackSpec, episodes: int, max_seconds: float, latency_s: float = 0.2,
            difficulty: str | None = None, modes: tuple[str, ...] = MODES) -> dict[str, tuple[float, float]]:
    """(success rate, mean simulated seconds per episode) per mode over the same `episodes` seeds, each
    chunk taking `latency_s` (simulated)."""
    out = {}
    for mode in modes:
        report = evaluate(spec, episodes, seed=0, max_seconds=max_seconds, difficulty=difficulty,
                          inference=InferenceOptions(mode, min_latency_s=latency_s))
        out[mode] = (report.success_rate, sum(e.sim_seconds for e in report.episodes) / max(episodes, 1))
    return out


def _success_text(rates: dict[str, tuple[float, float]]) -> str:
    return ", ".join(f"{m} {rate:.2f} ({seconds:.1f} s an episode)" for m, (rate, seconds) in rates.items())


def section(seconds: float, episodes: int, checkpoint: str | None, policy_seconds: float) -> None:
    """Print both tables and the RESULT line."""
    import os

    print(f"chunk inference: {seconds:g} s per row on the wall clock, load {os.getloadavg()}")
    print(f"{'chunk':>6} {'rate':>5} {'mode':>6} | {'jitter p50 ms':>13} {'jitter p99 ms':>13} | {'dry ticks':>9} "
          f"{'no-action periods':>17} | "
          f"{'max jump, boundary':>18} {'(median)':>8} {'within a chunk':>14} | {'chunks':>6}")
    rows: dict[tuple[float, float, str], dict[str, float]] = {}
    for latency in (0.1, 0.3):
        for hz in (30.0, 50.0):
            for mode in MODES:
                r = timing(mode, hz, latency, seconds)
                rows[latency, hz, mode] = r
                print(f"{latency * 1000:4.0f}ms {hz:5.0f} {mode:>6} | {r['late_p50']:13.2f} {r['late_p99']:13.2f} | "
                      f"{r['dry']:9.0f} {r['no_action']:17.0f} | {r['jump_boundary']:18.3f} "
                      f"{r['jump_boundary_p50']:8.3f} "
                      f"{r['jump_within']:14.3f} | {r['chunks']:6.0f}")
    scripted = success(StackSpec(), episodes, 90.0)
    print(f"success, scripted stack, {episodes} episodes, chunks slowed to 200 ms: {_success_text(scripted)}")
    result: dict[str, Any] = {}
    for (latency, hz, mode), r in rows.items():
        tag = f"{mode}_{latency * 1000:.0f}ms_{hz:.0f}hz"
        result[f"dry_{tag}"] = f"{r['dry']:.0f}"
        result[f"no_action_{tag}"] = f"{r['no_action']:.0f}"
        result[f"jitter_p99_ms_{tag}"] = f"{r['late_p99']:.1f}"
        result[f"jump_boundary_{tag}"] = f"{r['jump_boundary']:.3f}"
    result.update({f"success_scripted_{m}": f"{v:.2f}" for m, (v, _) in scripted.items()})
    if checkpoint:
        from steerable.policy.checkpoint import trained_on

        difficulty = str(trained_on(checkpoint).get("synthetic_difficulty") or "easy")
        spec = StackSpec("scripted", "policy", policy_path=checkpoint, observation="privileged")
        # every chunk is a real inference on the CPU (rtc, its overlap guided, costs about twice as many)
        learned = success(spec, episodes, policy_seconds, difficulty=difficulty)
        print(f"success, scripted planner / learned low level ({checkpoint}), {episodes} episodes of at most "
              f"{policy_seconds:g} s, chunks slowed to 200 ms: {_success_text(learned)}")
        result.update({f"success_learned_{m}": f"{v:.2f}" for m, (v, _) in learned.items()})
    print("RESULT " + " ".join(f"{k}={v}" for k, v in result.items()))
