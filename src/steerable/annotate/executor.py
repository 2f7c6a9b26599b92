"""Where episodes run: the executor seam between a run (open, check, validate, write, summarize)
and the per-episode pipeline (`engine.run_episodes`).

Every executor runs the same `Pipeline`: the enabled modules built against a VLM client, fed
episodes of a dataset, staging into one folder. `LocalExecutor` runs it in this process; the Ray
executor (`steerable.distributed`) runs it in actors and streams each episode's result back. The
run on the driver does not know which: it gets a `Session` (the modules that run, their notes,
the model, live VLM counters) and a list of results in episode order.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from steerable.annotate.config import AnnotateConfig
from steerable.annotate.engine import EpisodeResult, Progress, run_episodes
from steerable.annotate.module import AnnotationModule
from steerable.annotate.registry import build_modules
from steerable.annotate.staging import Staging
from steerable.dataset import EpisodeMeta, LeRobotDataset
from steerable.vlm.protocol import VLMStats

if TYPE_CHECKING:
    from steerable.vlm.protocol import VLMClient

__all__ = [
    "EpisodeJob",
    "Executor",
    "LocalExecutor",
    "Pipeline",
    "Session",
    "merge_stats",
    "open_model",
    "open_pipeline",
]


@dataclass(frozen=True)
class EpisodeJob:
    """What any process needs to run the pipeline (plain data: it travels to Ray actors)."""

    cfg: AnnotateConfig
    root: Path  # the dataset the modules read
    staging_root: Path | str  # a local path or an fsspec URL
    camera: str | None
    debug: bool = False


@contextlib.asynccontextmanager
async def open_model(cfg: AnnotateConfig, injected: VLMClient | None) -> AsyncIterator[VLMClient | None]:
    """The VLM client, or None when `--vlm.backend auto` finds no model (motion-only run).

    A run has decided `auto` already (`run._annotate`): `resolve_backend` then only reads the name.
    """
    from steerable.vlm.backends import resolve_backend
    from steerable.vlm.factory import open_vlm

    if injected is not None:
        yield injected
        return
    if resolve_backend(cfg.vlm) is None:
        yield None
        return
    async with open_vlm(cfg.vlm) as vlm:
        yield vlm


@dataclass
class Pipeline:
    """The enabled modules, built against one client, over one dataset and one staging folder."""

    job: EpisodeJob
    dataset: LeRobotDataset
    modules: list[AnnotationModule]
    notes: list[str]
    vlm: VLMClient | None

    @property
    def module_names(self) -> list[str]:
        return [m.name for m in self.modules]

    async def run(
        self,
        episodes: Sequence[EpisodeMeta],
        progress: Progress,
        on_result: Callable[[EpisodeResult], None] | None = None,
    ) -> list[EpisodeResult]:
        cfg = self.job.cfg
        return await run_episodes(
            self.dataset, episodes, self.modules, Staging(self.job.staging_root), seed=cfg.seed,
            vlm=self.vlm, camera=self.job.camera, parallelism=cfg.executor.episode_parallelism,
            force=cfg.force, progress=progress, debug=self.job.debug, on_result=on_result,
        )


@contextlib.asynccontextmanager
async def open_pipeline(
    job: EpisodeJob, dataset: LeRobotDataset | None = None, injected: VLMClient | None = None
) -> AsyncIterator[Pipeline]:
    """Open the model (launching vLLM replicas for that backend) and build the enabled modules."""
    ds = dataset if dataset is not None else LeRobotDataset(job.root)
    async with open_model(job.cfg, injected) as vlm:
        modules, notes = build_modules(job.cfg.stages(), vlm)
        yield Pipeline(job, ds, modules, notes, vlm)


class Session(Protocol):
    """An executor, ready: what the driver needs to run episodes and summarize the run."""

    @property
    def modules(self) -> list[str]: ...  # the modules that run, in registry order
    @property
    def notes(self) -> list[str]: ...
    @property
    def model_id(self) -> str | None: ...
    @property
    def stats(self) -> VLMStats | None: ...  # live counters, None without a model

    async def run(self, episodes: Sequence[EpisodeMeta], progress: Progress) -> list[EpisodeResult]:
        """Every episode through the pipeline; results in the order of `episodes`."""
        ...


class Executor(Protocol):
    def open(
        self, job: EpisodeJob, dataset: LeRobotDataset, injected: VLMClient | None
    ) -> AbstractAsyncContextManager[Session]: ...


class _LocalSession:
    def __init__(self, pipeline: Pipeline) -> None:
        self._pipeline = pipeline

    @property
    def modules(self) -> list[str]:
        return self._pipeline.module_names

    @property
    def notes(self) -> list[str]:
        return self._pipeline.notes

    @property
    def model_id(self) -> str | None:
        vlm = self._pipeline.vlm
        return None if vlm is None else vlm.model_id or "unknown model"

    @property
    def stats(self) -> VLMStats | None:
        return None if self._pipeline.vlm is None else self._pipeline.vlm.stats

    async def run(self, episodes: Sequence[EpisodeMeta], progress: Progress) -> list[EpisodeResult]:
        return await self._pipeline.run(episodes, progress)


class LocalExecutor:
    """Episodes run in this process, concurrently on its event loop (the default)."""

    @contextlib.asynccontextmanager
    async def open(
        self, job: EpisodeJob, dataset: LeRobotDataset, injected: VLMClient | None
    ) -> AsyncIterator[Session]:
        async with open_pipeline(job, dataset, injected) as pipeline:
            yield _LocalSession(pipeline)


def merge_stats(snapshots: Iterable[dict[str, Any]]) -> VLMStats:
    """The counters of several clients (one per worker) as one: sums, and the largest peak."""
    total = VLMStats()
    for snap in snapshots:
        for key in ("calls", "succeeded", "failures", "retries", "in_flight", "prompt_tokens",
                    "completion_tokens", "request_bytes"):
            setattr(total, key, getattr(total, key) + int(snap.get(key, 0)))
        total.max_in_flight = max(total.max_in_flight, int(snap.get("max_in_flight", 0)))
        for kind, count in dict(snap.get("reasons", {})).items():
            total.reasons[kind] = total.reasons.get(kind, 0) + int(count)
        for url, seconds in dict(snap.get("no_reply_s", {})).items():  # the longest silence of any worker
            since = time.monotonic() - float(seconds)
            total.silent_since[url] = min(total.silent_since.get(url, since), since)
            total.waiting[url] = total.waiting.get(url, 0) + 1  # workers waiting on it, enough for `no_reply`
    return total
