"""Evaluation in an environment (the `lerobot-eval` of this loop): seeded tasks, no person, in parallel.

Episode i resets the environment (built by name through `steerable.runtime.environments`) with seed
`seed + i` and no task, so the env draws one (the simulator: like the synthetic dataset's, at its
`difficulty`); success is what the env's `success()` says at the end. With interjections, an env
that takes them (`steerable.control.TakesInterjections`) plans an operator's correction, says when
it is due, and checks success against the corrected task (the simulator: the target of the first
pick-and-place step changes while the robot carries its cube, "Wait, the red cube goes in the grey
bin."); an env that does not is refused before any episode runs.
"""

from __future__ import annotations

import logging
import os
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from typing import Any

from steerable.control import TakesInterjections
from steerable.errors import ConfigError
from steerable.processes import worker_pool
from steerable.runtime.environments import EnvSpec, environment_options, make_env
from steerable.runtime.loop import LoopRates, Runtime
from steerable.runtime.stack import StackSpec, build_high, build_low, check_scripted
from steerable.tools import load_tools

__all__ = ["EpisodeResult", "EvalReport", "evaluate", "run_episode"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class EpisodeResult:
    seed: int
    task: str
    kind: str
    interjection: str | None
    success: bool
    sim_seconds: float
    wall_seconds: float
    warnings: int


@dataclass(frozen=True)
class EvalReport:
    episodes: list[EpisodeResult]
    high_level: str
    low_level: str
    wall_seconds: float
    difficulty: str | None = "easy"  # the env's task mix (None: an env without one)
    env: str = "sim"

    @property
    def success_rate(self) -> float:
        return sum(e.success for e in self.episodes) / max(len(self.episodes), 1)

    def groups(self) -> dict[str, dict[str, tuple[int, int]]]:
        """{"kind": {name: (successes, episodes)}, "interjection": {"with"/"without": (...)}}."""
        out: dict[str, dict[str, tuple[int, int]]] = {"kind": {}, "interjection": {}}
        counts: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
        for e in self.episodes:
            for group, key in (("kind", e.kind), ("interjection", "with" if e.interjection else "without")):
                counts[group, key][0] += int(e.success)
                counts[group, key][1] += 1
        for (group, key), (ok, n) in sorted(counts.items()):
            out[group][key] = (ok, n)
        return out

    def to_json(self) -> dict[str, Any]:
        groups = self.groups()
        return {
            "episodes": len(self.episodes),
            "success_rate": self.success_rate,
            "high_level": self.high_level,
            "low_level": self.low_level,
            "difficulty": self.difficulty,
            "by_kind": {k: {"episodes": n, "success_rate": ok / n} for k, (ok, n) in groups["kind"].items()},
            "by_interjection": {
                k: {"episodes": n, "success_rate": ok / n} for k, (ok, n) in groups["interjection"].items()
            },
            "mean_sim_seconds": sum(e.sim_seconds for e in self.episodes) / max(len(self.episodes), 1),
            "wall_seconds": self.wall_seconds,
            "results": [asdict(e) for e in self.episodes],
        }


def run_episode(
    spec: StackSpec,
    seed: int,
    *,
    env: EnvSpec = EnvSpec(),  # noqa: B008  # frozen
    interject: bool = False,
    task: str | None = None,
    max_seconds: float = 90.0,
    rates: LoopRates | None = None,
) -> EpisodeResult:
    """One episode without a person, as fast as the CPU allows (virtual clock)."""
    started = time.perf_counter()
    environment = make_env(env, spec.fps)
    try:
        drawn = environment.reset(seed, task)
        high, low = build_high(spec, environment), build_low(spec, environment)
        rt = Runtime(environment, low, high, tools=load_tools({}, tts="text"),
                     rates=rates or LoopRates(ctrl_hz=spec.fps))
        warnings: list[str] = []
        rt.listeners.append(lambda e: warnings.append(e.text) if e.kind == "warn" else None)
        rt.submit("task", drawn.task)
        interjector = _interjector(environment, env) if interject else None
        planned = interjector.plan_interjection(seed) if interjector is not None else None
        said: str | None = None
        limit = int(max_seconds * spec.fps)
        while rt.frame < limit:
            if interjector is not None and planned is not None and said is None and interjector.interjection_due():
                said = planned
                rt.submit("interject", said)
                interjector.apply_interjection()
            rt.tick()
            rt.clock.wait_next()
            if rt.frame > 1 and rt.idle and not rt.pending_inputs and (said is not None or planned is None):
                break
        success = environment.success()
    finally:
        environment.close()
    return EpisodeResult(
        seed=seed,
        task=drawn.task,
        kind=drawn.kind,
        interjection=said,
        success=bool(success),
        sim_seconds=rt.frame / spec.fps,
        wall_seconds=time.perf_counter() - started,
        warnings=len(warnings),
    )


def _interjector(environment: object, env: EnvSpec) -> TakesInterjections:
    if not isinstance(environment, TakesInterjections):
        raise ConfigError(f"--eval_interjections: --env {env.name} cannot correct a task part way "
                          "(it does not implement steerable.control.TakesInterjections); evaluate without it")
    return environment


def _worker(args: tuple[StackSpec, EnvSpec, int, bool, float]) -> EpisodeResult:
    spec, env, seed, interject, max_seconds = args
    return run_episode(spec, seed, env=env, interject=interject, max_seconds=max_seconds)


def evaluate(
    spec: StackSpec,
    episodes: int,
    *,
    env: EnvSpec = EnvSpec(),  # noqa: B008  # frozen
    seed: int = 0,
    interjections: bool = False,
    workers: int | None = None,
    difficulty: str | None = None,
    max_seconds: float = 90.0,
    on_result: Callable[[EpisodeResult], None] | None = None,
) -> EvalReport:
    """Run `episodes` seeded episodes across `workers` processes (default: one per core); an episode
    not done after `max_seconds` of simulated time counts as a failure. `difficulty` is the env's
    `difficulty` option (the simulator's task mix; None: the env's default)."""
    started = time.perf_counter()
    if difficulty is not None:
        env = replace(env, options={**env.options, "difficulty": difficulty})
    # A bad option, a missing test double or an env that cannot interject fails here, not in every worker.
    probe = make_env(env, spec.fps)
    try:
        check_scripted(spec, probe)
        if interjections:
            _interjector(probe, env)
    finally:
        probe.close()
    jobs = [(spec, env, seed + i, interjections, max_seconds) for i in range(episodes)]
    n = max(1, min(workers or os.cpu_count() or 1, episodes))
    results: list[EpisodeResult] = []
    if n == 1:
        for job in jobs:
            results.append(_worker(job))
            if on_result:
                on_result(results[-1])
    else:
        with worker_pool(n) as pool:  # Ctrl-C, SIGTERM and SIGKILL of this process end the workers too
            for result in pool.imap(_worker, jobs):
                results.append(result)
                if on_result:
                    on_result(result)
    level = environment_options(env).get("difficulty")
    return EvalReport(results, spec.high_level, spec.low_level, time.perf_counter() - started,
                      level if isinstance(level, str) else None, env.name)
