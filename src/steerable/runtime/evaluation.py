"""Evaluation in an environment (the `lerobot-eval` of this loop): seeded tasks, no person, in parallel.

Episode i resets the environment (built by name through `steerable.runtime.environments`) with seed
`seed + i` and no task, so the env draws one (the simulator: like the synthetic dataset's, at its
`difficulty`); success is what the env's `success()` says at the end (an episode also ends when the
env ends it itself, `episode_over()`, as a LeRobot gym env does). With interjections, an env
that takes them (`steerable.control.TakesInterjections`) plans an operator's correction, says when
it is due, and checks success against the corrected task (the simulator: the target of the first
pick-and-place step changes while the robot carries its cube, "Wait, the red cube goes in the grey
bin."); an env that does not is refused before any episode runs.

Phrasings (`phrasings`, `--eval_phrasings`): "seen" leaves the env as it is (the simulator words its
tasks and interjections as the synthetic datasets do); "unseen" sets the env's `phrasings` option to
"unseen" (the simulator's held-out paraphrases, `steerable.synthetic.phrasings`, which no dataset
holds); "both" runs every seed twice, once in each, the same task and correction worded apart, and
reports them side by side (`success_rate_seen`, `success_rate_unseen`; `success_rate` stays the
share of all episodes run that succeeded). An env whose factory takes no `phrasings` option is
refused unless "seen".

What an evaluation costs: the loop bounds the model calls per simulated second by the rates
(`--chunk_hz`, `--high_level_hz`; see `steerable.runtime.loop`), `--max_seconds` bounds the
simulated seconds of an episode, and each worker runs steerable's policies on one torch thread
(episodes are the parallelism: more threads per worker only oversubscribe the cores). A LeRobot
policy (`--low_level lerobot`) keeps torch's thread count: the thread count changes the last bits of
its sums, and its actions must be the numbers `steerable run` and LeRobot's own path give (one
thread moved PushT's pixel-scale actions by up to 6.1e-5); `OMP_NUM_THREADS` sets it for all three
alike. While episodes run, `on_time` hears each one's simulated seconds, so a long episode shows
progress before it ends.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from typing import Any

from steerable.control import LowLevelController, TakesInterjections
from steerable.errors import ConfigError
from steerable.processes import worker_pool
from steerable.runtime.chunks import InferenceOptions
from steerable.runtime.environments import EnvSpec, environment_options, make_env
from steerable.runtime.loop import LoopRates, Runtime
from steerable.runtime.stack import StackSpec, build_high, build_low, check_scripted
from steerable.tools import load_tools

__all__ = ["EVAL_PHRASINGS", "EpisodeResult", "EvalReport", "evaluate", "run_episode"]

logger = logging.getLogger(__name__)

# `--eval_phrasings`: which share of the env's phrasings the episodes are worded in.
EVAL_PHRASINGS = ("seen", "unseen", "both")


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
    phrasing: str = "seen"  # the env's `phrasings` option: seen (as the training data) or unseen


@dataclass(frozen=True)
class EvalReport:
    episodes: list[EpisodeResult]
    high_level: str
    low_level: str
    wall_seconds: float
    difficulty: str | None = "easy"  # the env's task mix (None: an env without one)
    env: str = "sim"
    phrasings: str = "seen"  # EVAL_PHRASINGS

    @property
    def success_rate(self) -> float:
        """The share of all episodes run that succeeded (with "both", seen and unseen together)."""
        return sum(e.success for e in self.episodes) / max(len(self.episodes), 1)

    def groups(self) -> dict[str, dict[str, tuple[int, int]]]:
        """{"kind": {name: (successes, episodes)}, "interjection": {"with"/"without": (...)},
        "phrasing": {"seen"/"unseen": (...)}}."""
        out: dict[str, dict[str, tuple[int, int]]] = {"kind": {}, "interjection": {}, "phrasing": {}}
        counts: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
        for e in self.episodes:
            for group, key in (("kind", e.kind), ("interjection", "with" if e.interjection else "without"),
                               ("phrasing", e.phrasing)):
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
            "phrasings": self.phrasings,
            **{f"success_rate_{k}": ok / n for k, (ok, n) in groups["phrasing"].items()},
            "high_level": self.high_level,
            "low_level": self.low_level,
            "difficulty": self.difficulty,
            "by_kind": {k: {"episodes": n, "success_rate": ok / n} for k, (ok, n) in groups["kind"].items()},
            "by_interjection": {
                k: {"episodes": n, "success_rate": ok / n} for k, (ok, n) in groups["interjection"].items()
            },
            "by_phrasing": {k: {"episodes": n, "success_rate": ok / n} for k, (ok, n) in groups["phrasing"].items()},
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
    on_time: Callable[[float], None] | None = None,
    low: LowLevelController | None = None,
    inference: InferenceOptions | None = None,
) -> EpisodeResult:
    """One episode without a person, as fast as the CPU allows (virtual clock); `on_time(seconds)`
    after each simulated second. `low`: a controller built by the caller (a benchmark's or a test's
    own, e.g. `benchmarks/bc_baseline.py`), run instead of the spec's `low_level` (in this process
    only: `evaluate`'s workers rebuild the spec's). `inference`: how chunks are inferred (`--inference`;
    on this virtual clock a slow policy's latency is simulated, `steerable.runtime.chunks`)."""
    started = time.perf_counter()
    environment = make_env(env, spec.fps)
    try:
        drawn = environment.reset(seed, task)
        high = build_high(spec, environment)
        low = low if low is not None else build_low(spec, environment)
        rt = Runtime(environment, low, high, tools=load_tools({}, tts="text"),
                     rates=rates or LoopRates(ctrl_hz=spec.fps), inference=inference or InferenceOptions())
        warnings: list[str] = []
        rt.listeners.append(lambda e: warnings.append(e.text) if e.kind == "warn" else None)
        rt.submit("task", drawn.task)
        interjector = _interjector(environment, env) if interject else None
        planned = interjector.plan_interjection(seed) if interjector is not None else None
        said: str | None = None
        ended = getattr(environment, "episode_over", None)  # an env that ends episodes itself (a gym env)
        limit = int(max_seconds * spec.fps)
        second = max(int(round(rt.rates.ctrl_hz)), 1)
        while rt.frame < limit:
            if interjector is not None and planned is not None and said is None and interjector.interjection_due():
                said = planned
                rt.submit("interject", said)
                interjector.apply_interjection()
            rt.tick()
            rt.clock.wait_next()
            if on_time is not None and rt.frame % second == 0:
                on_time(rt.frame / rt.rates.ctrl_hz)
            if rt.frame > 1 and rt.idle and not rt.pending_inputs and (said is not None or planned is None):
                break
            if callable(ended) and ended():
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
        phrasing=_phrasing(env),
    )


def _phrasing(env: EnvSpec) -> str:
    return str(env.options.get("phrasings", "seen"))


def _phrased(env: EnvSpec, phrasings: str) -> list[EnvSpec]:
    """The env of each pass over the seeds: as it is ("seen"), set to "unseen", or both of those."""
    if phrasings not in EVAL_PHRASINGS:
        raise ConfigError(f"--eval_phrasings {phrasings!r}: choose {', '.join(EVAL_PHRASINGS)}")
    if phrasings == "seen":
        return [env]
    if "phrasings" not in environment_options(env):
        raise ConfigError(f"--eval_phrasings {phrasings}: --env {env.name} has no held-out phrasings (its factory "
                          "takes no `phrasings` option); evaluate without it")
    shares = ("seen", "unseen") if phrasings == "both" else ("unseen",)
    return [replace(env, options={**env.options, "phrasings": share}) for share in shares]


def _interjector(environment: object, env: EnvSpec) -> TakesInterjections:
    if not isinstance(environment, TakesInterjections):
        raise ConfigError(f"--eval_interjections: --env {env.name} cannot correct a task part way "
                          "(it does not implement steerable.control.TakesInterjections); evaluate without it")
    return environment


@dataclass(frozen=True)
class _Job:
    spec: StackSpec
    env: EnvSpec
    seed: int
    interject: bool
    max_seconds: float
    rates: LoopRates | None
    slot: int  # this episode's place in the shared simulated-seconds array
    inference: InferenceOptions | None = None


# In a pool worker: each episode's simulated seconds so far, read by the parent for its progress.
_SIM_SECONDS: Any = None


def _share_sim_seconds(shared: Any) -> None:
    global _SIM_SECONDS
    _SIM_SECONDS = shared


@contextmanager
def _one_torch_thread(spec: StackSpec) -> Iterator[None]:
    """Torch on one thread while an episode runs (restored after). Episodes are the parallelism, one
    worker per core: two workers with two threads each on two cores ran the tiny policy's chunk
    inference 3-12x slower than with one thread each (and its ops are too small to split anyway).
    Not with a LeRobot low level: its actions stay those of LeRobot's own path (module docstring)."""
    if spec.low_level == "lerobot":
        yield
        return
    torch = sys.modules.get("torch")
    if torch is None and "policy" in (spec.high_level, spec.low_level):
        try:
            import torch
        except ImportError:  # reported by the stack, with the extra to install
            torch = None
    if torch is None:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _episode(job: _Job, on_time: Callable[[float], None] | None) -> EpisodeResult:
    with _one_torch_thread(job.spec):
        return run_episode(job.spec, job.seed, env=job.env, interject=job.interject, max_seconds=job.max_seconds,
                           rates=job.rates, on_time=on_time, inference=job.inference)


def _worker(job: _Job) -> EpisodeResult:
    """A pool worker's episode: its simulated seconds go to the shared array as it runs."""
    shared = _SIM_SECONDS

    def mark(seconds: float) -> None:
        shared[job.slot] = seconds

    return _episode(job, mark if shared is not None else None)


def _for_seed(on_time: Callable[[int, float], None] | None, seed: int) -> Callable[[float], None] | None:
    if on_time is None:
        return None
    return lambda seconds: on_time(seed, seconds)


def _watch(shared: Any, jobs: list[_Job], on_time: Callable[[int, float], None], finished: set[tuple[int, str]],
           lock: threading.Lock, stop: threading.Event, every_s: float = 0.5) -> None:
    """The parent's view of the pool's running episodes: `on_time(seed, seconds)` when one moved on."""
    last = [0.0] * len(jobs)
    while not stop.wait(every_s):
        for job in jobs:
            seconds = shared[job.slot]
            if seconds != last[job.slot]:
                last[job.slot] = seconds
                with lock:
                    if (job.seed, _phrasing(job.env)) not in finished:
                        on_time(job.seed, seconds)


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
    rates: LoopRates | None = None,
    on_result: Callable[[EpisodeResult], None] | None = None,
    on_time: Callable[[int, float], None] | None = None,
    inference: InferenceOptions | None = None,
    phrasings: str = "seen",
) -> EvalReport:
    """Run `episodes` seeded episodes across `workers` processes (default: one per core); an episode
    not done after `max_seconds` of simulated time counts as a failure. `difficulty` is the env's
    `difficulty` option (the simulator's task mix; None: the env's default); `rates` the loop's
    (default: the control rate at the stack's fps, the default chunk and high-level rates).
    `on_result(result)` hears each episode as it ends (in any order; the report lists them by seed),
    `on_time(seed, seconds)` a running episode's simulated seconds (after each second in one
    process; every half second from a pool), never after that episode's `on_result`. `inference`: as
    `run_episode`'s. `phrasings`: seen | unseen | both (module docstring); with both, every seed runs
    twice, so `episodes` seeds make twice as many episodes."""
    started = time.perf_counter()
    if difficulty is not None:
        env = replace(env, options={**env.options, "difficulty": difficulty})
    passes = _phrased(env, phrasings)
    # A bad option, a missing test double or an env that cannot interject fails here, not in every worker.
    probe = make_env(passes[-1], spec.fps)
    try:
        check_scripted(spec, probe)
        if interjections:
            _interjector(probe, env)
    finally:
        probe.close()
    # Every seed of one pass before the next: a seed's two wordings rarely run at once (progress is by seed).
    jobs = [_Job(spec, each, seed + i, interjections, max_seconds, rates, k * episodes + i, inference)
            for k, each in enumerate(passes) for i in range(episodes)]
    n = max(1, min(workers or os.cpu_count() or 1, len(jobs)))
    results: list[EpisodeResult] = []
    finished: set[tuple[int, str]] = set()
    lock = threading.Lock()

    def done(result: EpisodeResult) -> None:
        with lock:
            finished.add((result.seed, result.phrasing))
            results.append(result)
            if on_result:
                on_result(result)

    if n == 1:
        for job in jobs:
            done(_episode(job, _for_seed(on_time, job.seed)))
    else:
        shared = multiprocessing.Array("d", len(jobs), lock=False)
        stop = threading.Event()
        watcher = None
        if on_time is not None:
            watcher = threading.Thread(target=_watch, args=(shared, jobs, on_time, finished, lock, stop),
                                       name="steerable-eval-progress", daemon=True)
            watcher.start()
        try:
            # Ctrl-C, SIGTERM and SIGKILL of this process end the workers too
            with worker_pool(n, _share_sim_seconds, (shared,)) as pool:
                for result in pool.imap_unordered(_worker, jobs):
                    done(result)
        finally:
            stop.set()
            if watcher is not None:
                watcher.join()
    results.sort(key=lambda r: (r.seed, r.phrasing))
    level = environment_options(env).get("difficulty")
    return EvalReport(results, spec.high_level, spec.low_level, time.perf_counter() - started,
                      level if isinstance(level, str) else None, env.name, phrasings)
