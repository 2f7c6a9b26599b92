"""Evaluation in the simulator (the `lerobot-eval` of this loop): seeded tasks, no person, in parallel.

Episode i uses seed `seed + i`: the scene and task are drawn like the synthetic dataset's at a
difficulty (easy: one or two pick-and-place steps or a stacking; realistic / hard: up to four steps,
pushes among them). With interjections, the operator corrects the target of the first pick-and-place
step while the robot carries its cube there (once the cube has travelled `CARRY_BEFORE_INTERJECTING`
from where it was picked up), in one of the phrasings people use in the synthetic data's interjections
("Wait, the red cube goes in the grey bin."), naming the new receptacle; success is checked against
the corrected target.
"""

from __future__ import annotations

import logging
import math
import multiprocessing
import os
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from steerable.runtime.loop import LoopRates, Runtime
from steerable.runtime.sim.env import SimEnv, task_kind
from steerable.runtime.stack import StackSpec, build_high, build_low
from steerable.synthetic.difficulty import get_difficulty
from steerable.synthetic.oracle import INTERJECTION_PHRASES
from steerable.synthetic.tasks import Step
from steerable.synthetic.world import WorldState
from steerable.tools import load_tools

__all__ = ["EpisodeResult", "EvalReport", "evaluate", "plan_interjection", "run_episode"]

logger = logging.getLogger(__name__)

# How far (metres, on the table) the held cube travels before the operator corrects its target.
CARRY_BEFORE_INTERJECTING = 0.05


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
    difficulty: str = "easy"

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


def plan_interjection(world: WorldState, steps: Sequence[Step], seed: int = 0) -> tuple[int, str, str, bool] | None:
    """(step index, what the operator says, new target, stack) for a target change, or None if none fits.

    The first step that is not a push is corrected: a placement to another receptacle (the phrasing
    drawn by `seed` from the synthetic data's interjections), a stacking onto an uninvolved cube.
    """
    index = next((i for i, s in enumerate(steps) if not s.push), None)
    if index is None:
        return None
    step = steps[index]
    involved = {s.cube for s in steps} | {s.target for s in steps if not s.push}
    if step.stack:
        others = [c.name for c in world.scene.cubes if c.name not in involved]
        return (index, f"no, put it on the {others[0]} instead", others[0], True) if others else None
    others = [r.name for r in world.scene.receptacles if r.name != step.target]
    if not others:
        return None
    phrase = INTERJECTION_PHRASES[seed % len(INTERJECTION_PHRASES)]
    return index, phrase.format(cube=step.cube, old=step.target, new=others[0]), others[0], False


def run_episode(
    spec: StackSpec,
    seed: int,
    *,
    interject: bool = False,
    task: str | None = None,
    max_seconds: float = 90.0,
    rates: LoopRates | None = None,
    difficulty: str = "easy",
) -> EpisodeResult:
    """One episode without a person, as fast as the CPU allows (virtual clock)."""
    started = time.perf_counter()
    env = SimEnv(fps=spec.fps)
    drawn = env.reset(seed, task, difficulty=difficulty)
    high, low = build_high(spec), build_low(spec)
    rt = Runtime(env, low, high, tools=load_tools({}, tts="text"), rates=rates or LoopRates(ctrl_hz=spec.fps))
    warnings: list[str] = []
    rt.listeners.append(lambda e: warnings.append(e.text) if e.kind == "warn" else None)
    rt.submit("task", drawn.text)
    world = env.observe(render=False).privileged
    planned = plan_interjection(world, drawn.steps, seed) if interject else None
    said: str | None = None
    picked_at: tuple[float, float] | None = None
    limit = int(max_seconds * spec.fps)
    while rt.frame < limit:
        if planned is not None and said is None and env.world is not None:
            cube = env.world.scene.cube_index(drawn.steps[planned[0]].cube)
            x, y, _ = env.world.positions[cube]
            if env.world.held != cube:
                picked_at = None
            elif picked_at is None:
                picked_at = (x, y)
            elif math.hypot(x - picked_at[0], y - picked_at[1]) >= CARRY_BEFORE_INTERJECTING:
                said = planned[1]
                rt.submit("interject", said)
                env.change_target(planned[0], planned[2], planned[3])
        rt.tick()
        rt.clock.wait_next()
        if rt.frame > 1 and rt.idle and not rt.pending_inputs and (said is not None or planned is None):
            break
    env_success = env.success()
    return EpisodeResult(
        seed=seed,
        task=drawn.text,
        kind=task_kind(drawn.steps) if drawn.steps else "free-form",
        interjection=said,
        success=bool(env_success),
        sim_seconds=rt.frame / spec.fps,
        wall_seconds=time.perf_counter() - started,
        warnings=len(warnings),
    )


def _worker(args: tuple[StackSpec, int, bool, str, float]) -> EpisodeResult:
    spec, seed, interject, difficulty, max_seconds = args
    return run_episode(spec, seed, interject=interject, difficulty=difficulty, max_seconds=max_seconds)


def evaluate(
    spec: StackSpec,
    episodes: int,
    *,
    seed: int = 0,
    interjections: bool = False,
    workers: int | None = None,
    difficulty: str = "easy",
    max_seconds: float = 90.0,
    on_result: Callable[[EpisodeResult], None] | None = None,
) -> EvalReport:
    """Run `episodes` seeded episodes across `workers` processes (default: one per core); an episode
    not done after `max_seconds` of simulated time counts as a failure."""
    started = time.perf_counter()
    get_difficulty(difficulty)  # an unknown level fails here, not in every worker
    jobs = [(spec, seed + i, interjections, difficulty, max_seconds) for i in range(episodes)]
    n = max(1, min(workers or os.cpu_count() or 1, episodes))
    results: list[EpisodeResult] = []
    if n == 1:
        for job in jobs:
            results.append(_worker(job))
            if on_result:
                on_result(results[-1])
    else:
        method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
        with multiprocessing.get_context(method).Pool(n) as pool:
            for result in pool.imap(_worker, jobs):
                results.append(result)
                if on_result:
                    on_result(result)
    return EvalReport(results, spec.high_level, spec.low_level, time.perf_counter() - started, difficulty)
