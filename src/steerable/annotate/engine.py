"""The episode pipeline: episodes flow through the modules concurrently, with staging and resume.

There are no global phase barriers: each episode runs its modules as a small dependency graph while
other episodes run theirs, so the VLM server always has work. A failure stays inside its module:
the episode keeps every other module's output, and only the modules that read the failed one's
output (its dependants) fail with it.

A failure is either retryable (the model, the network, a full disk: a re-run may succeed) or
permanent (`EpisodeResult.permanent`: the episode's video is missing or corrupt, a feature it needs is
absent, or the code crashed on it), which a re-run of the same command repeats.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from steerable.annotate.context import EpisodeContext
from steerable.annotate.module import AnnotationModule, ModuleOutput
from steerable.annotate.staging import StagedOutput, Staging, fingerprint_hash
from steerable.dataset import EpisodeMeta, LeRobotDataset
from steerable.errors import ConfigError, DatasetError, SteerableError, VideoError, VideoNotFoundError
from steerable.vlm.limiter import call_priority

if TYPE_CHECKING:
    from steerable.vlm.protocol import VLMClient

__all__ = ["EpisodeResult", "Progress", "run_episodes"]

log = logging.getLogger(__name__)


@dataclass
class EpisodeResult:
    episode_index: int
    outputs: dict[str, StagedOutput] = field(default_factory=dict)  # modules that succeeded
    reused: list[str] = field(default_factory=list)  # modules taken from staging (resume)
    failures: dict[str, str] = field(default_factory=dict)  # module -> why it failed
    permanent: dict[str, str] = field(default_factory=dict)  # failed module -> why a re-run fails it again
    seconds: float = 0.0

    @property
    def failure(self) -> str | None:
        """One line naming every failed module and why; None when every module succeeded."""
        if not self.failures:
            return None
        by_reason: dict[str, list[str]] = {}  # modules that failed alike are named together
        for name, reason in self.failures.items():
            by_reason.setdefault(reason, []).append(name)
        return "; ".join(f"{', '.join(names)}: {reason}" for reason, names in by_reason.items())


@dataclass
class Progress:
    """Live counters the display reads; updated from the event loop only."""

    total: int = 0
    done: int = 0
    failed: int = 0
    resumed: int = 0
    running: int = 0
    started_at: float = field(default_factory=time.monotonic)

    def record(self, result: EpisodeResult, modules: int) -> None:
        """Count one finished episode (every executor counts the same way)."""
        if result.failure:
            self.failed += 1
        else:
            self.done += 1
            if result.reused and len(result.reused) == modules:
                self.resumed += 1


async def run_episodes(
    dataset: LeRobotDataset,
    episodes: Sequence[EpisodeMeta],
    modules: Sequence[AnnotationModule],
    staging: Staging,
    *,
    seed: int,
    vlm: VLMClient | None,
    camera: str | None,
    parallelism: int,
    force: bool = False,
    progress: Progress | None = None,
    debug: bool = False,
    on_result: Callable[[EpisodeResult], None] | None = None,
) -> list[EpisodeResult]:
    """Run every module on every episode (bounded concurrency); results in episode order.

    `on_result` sees each episode's result as soon as it is done (an executor streams them on).
    """
    progress = progress or Progress()
    progress.total = len(episodes)
    position = {ep.episode_index: i for i, ep in enumerate(episodes)}
    hashes = _chain_hashes(modules)
    ranks = _critical_ranks(modules)
    gate = asyncio.Semaphore(max(1, parallelism))
    decodes = asyncio.Semaphore(max(1, os.cpu_count() or 1))

    async def one(ep: EpisodeMeta) -> EpisodeResult:
        async with gate:
            progress.running += 1
            try:
                return await _run_episode(
                    dataset, ep, modules, hashes, staging, seed=seed, vlm=vlm, camera=camera,
                    force=force, debug=debug, ranks=ranks, order=position[ep.episode_index], decodes=decodes,
                )
            finally:
                progress.running -= 1

    async def tracked(ep: EpisodeMeta) -> EpisodeResult:
        result = await one(ep)
        progress.record(result, len(modules))
        if on_result is not None:
            on_result(result)
        return result

    return list(await asyncio.gather(*(tracked(ep) for ep in episodes)))


def _critical_ranks(modules: Sequence[AnnotationModule]) -> dict[str, int]:
    """VLM call priority per module: 0 feeds other modules, 1 depends on one, 2 stands alone."""
    needed = {dep for m in modules for dep in m.requires}
    return {m.name: 0 if m.name in needed else (1 if m.requires else 2) for m in modules}


def _chain_hashes(modules: Sequence[AnnotationModule]) -> dict[str, str]:
    """Each module's hash covers its own fingerprint and those of the modules it reads."""
    hashes: dict[str, str] = {}
    for module in modules:
        upstream = {name: hashes.get(name, "absent") for name in module.requires}
        hashes[module.name] = fingerprint_hash({"self": module.fingerprint(), "upstream": upstream})
    return hashes


async def _run_episode(
    dataset: LeRobotDataset,
    ep: EpisodeMeta,
    modules: Sequence[AnnotationModule],
    hashes: dict[str, str],
    staging: Staging,
    *,
    seed: int,
    vlm: VLMClient | None,
    camera: str | None,
    force: bool,
    debug: bool,
    ranks: dict[str, int],
    order: int,
    decodes: asyncio.Semaphore | None = None,
) -> EpisodeResult:
    """Run one episode's modules as a small dependency graph.

    A module starts as soon as the modules it `requires` are done, so independent modules (plan
    and vqa, say) keep the server busy together. A module that fails costs its own output and that
    of the modules requiring it; the others finish and keep theirs.
    """
    started = time.monotonic()
    result = EpisodeResult(ep.episode_index)
    outputs: dict[str, StagedOutput] = {}
    finished = {m.name: asyncio.Event() for m in modules}
    shared: list[EpisodeContext] = []
    setup = asyncio.Lock()

    async def context(module: AnnotationModule) -> EpisodeContext:
        async with setup:
            if not shared:
                shared.append(
                    await asyncio.to_thread(
                        EpisodeContext.for_episode, dataset, ep.episode_index,
                        seed=seed, vlm=vlm, camera=camera, decodes=decodes,
                    )
                )
        deps = [n for n in module.requires if n in outputs]
        return replace(
            shared[0],
            upstream={n: outputs[n].rows for n in deps},
            upstream_meta={n: outputs[n].meta for n in deps},
        )

    async def run(module: AnnotationModule) -> None:
        call_priority.set((ranks[module.name], order))  # this task's VLM calls queue by it
        try:
            await attempt(module)
        except (SteerableError, OSError, ValueError) as exc:
            result.failures[module.name] = str(exc)
            cause = _permanent_cause(exc)
            if cause is not None:
                result.permanent[module.name] = cause
            # Listed at the end; --debug adds the traceback here, and the run goes on all the same.
            log.info("episode %d: %s failed: %s", ep.episode_index, module.name, exc, exc_info=debug)
        except Exception as exc:  # a bug: keep the run going, but keep the evidence
            result.failures[module.name] = f"internal error {type(exc).__name__}: {exc}"
            result.permanent[module.name] = "an internal error"
            log.error("episode %d crashed in %s:\n%s", ep.episode_index, module.name, traceback.format_exc())
        finally:
            finished[module.name].set()

    async def attempt(module: AnnotationModule) -> None:
        for dep in module.requires:
            if dep in finished:
                await finished[dep].wait()
        lost = [dep for dep in module.requires if dep in result.failures]
        if lost:
            # As lasting as the failures it inherits: permanent only when every one of them is.
            causes = [result.permanent.get(dep) for dep in lost]
            cause = None if None in causes else causes[0]
            raise _DependencyFailed(f"needs the {', '.join(lost)} output, which failed", cause)
        if not force and staging.is_current(ep.episode_index, module.name, hashes[module.name]):
            staged = staging.load(ep.episode_index, module.name)
            result.reused.append(module.name)
        else:
            output: ModuleOutput = await module.run(await context(module))
            staging.save(
                ep.episode_index, module.name, output.rows, fingerprint=hashes[module.name],
                meta=output.meta, notes=output.notes,
            )
            # Continue from what was staged, not from memory: a resumed run reads the same
            # JSON, so both paths write identical bytes.
            staged = staging.load(ep.episode_index, module.name)
        if staged is None:
            raise OSError(f"staged output of {module.name} for episode {ep.episode_index} vanished")
        outputs[module.name] = staged

    tasks = [asyncio.create_task(run(m)) for m in modules]
    try:
        await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if shared and shared[0].frames is not None:
            shared[0].frames.release()
    result.failures = {m.name: result.failures[m.name] for m in modules if m.name in result.failures}
    result.permanent = {m.name: result.permanent[m.name] for m in modules if m.name in result.permanent}
    result.outputs = {m.name: outputs[m.name] for m in modules if m.name in outputs}
    result.reused = [m.name for m in modules if m.name in result.reused]
    result.seconds = time.monotonic() - started
    return result


def _permanent_cause(exc: BaseException) -> str | None:
    """Why a module that raised `exc` would fail again on a re-run of the same command (a few words),
    or None when a re-run may succeed: the model, the network or the disk failed, not the episode."""
    if isinstance(exc, _DependencyFailed):
        return exc.cause
    if isinstance(exc, VideoNotFoundError):
        return "missing video"
    if isinstance(exc, VideoError):
        return "undecodable video"
    if isinstance(exc, DatasetError):
        return "unreadable data"
    if isinstance(exc, ConfigError):  # raised while running: the episode lacks what the module needs
        return "a missing feature"
    return None


class _DependencyFailed(SteerableError):
    """A module did not run because a module whose output it reads failed; `cause`: why that is
    permanent (None: retryable)."""

    def __init__(self, message: str, cause: str | None) -> None:
        super().__init__(message)
        self.cause = cause
