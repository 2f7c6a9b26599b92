"""One Ray actor of an annotation run: the pipeline opened once, batches of episodes streamed back.

Plain Python (no ray import): the driver wraps `EpisodeWorker` with `ray.remote`. Every result is
yielded as soon as its episode is done, so when the actor dies the driver knows exactly which
episodes of the batch are finished (their staging markers are on shared storage as well).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator
from typing import Any

from steerable.annotate.engine import EpisodeResult, Progress
from steerable.annotate.executor import EpisodeJob, Pipeline, open_pipeline

__all__ = ["EpisodeWorker", "WorkerInfo"]

# (module names, notes, model id): what the driver needs before the first episode.
WorkerInfo = tuple[list[str], list[str], str | None]


class EpisodeWorker:
    """Runs batches of episodes through the pipeline, against the VLM endpoints its job names."""

    def __init__(self, job: EpisodeJob) -> None:
        self._job = job
        self._stack = contextlib.AsyncExitStack()
        self._pipeline: Pipeline | None = None
        self._batches: set[asyncio.Task[None]] = set()  # running batches: close() cancels them

    def pid(self) -> int:
        return os.getpid()

    async def setup(self) -> WorkerInfo:
        """Open the model (checked; a vLLM replica is launched for that backend) and build modules."""
        pipeline = await self._ready()
        vlm = pipeline.vlm
        return pipeline.module_names, list(pipeline.notes), None if vlm is None else vlm.model_id or "unknown model"

    async def run_batch(self, indices: list[int]) -> AsyncIterator[tuple[EpisodeResult, dict[str, Any]]]:
        """Yield (result, this actor's VLM counters) per episode, in the order episodes finish."""
        pipeline = await self._ready()
        episodes = [pipeline.dataset.episode(i) for i in indices]
        queue: asyncio.Queue[EpisodeResult | None] = asyncio.Queue()

        async def drive() -> None:
            try:
                await pipeline.run(episodes, Progress(), on_result=queue.put_nowait)
            finally:
                queue.put_nowait(None)

        task = asyncio.create_task(drive())
        self._batches.add(task)
        task.add_done_callback(self._batches.discard)
        try:
            while (result := await queue.get()) is not None:
                yield result, self._counters()
            with contextlib.suppress(asyncio.CancelledError):  # close(): the run was stopped
                await task  # a crash of the pipeline itself surfaces here
        finally:
            if not task.done():
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)

    def counters(self) -> dict[str, Any]:
        """This actor's VLM counters now (the driver reads them once more at the end of a run)."""
        return self._counters()

    async def close(self) -> None:
        """Cancel the batches still running (the driver was interrupted), then close the pipeline."""
        for task in list(self._batches):
            task.cancel()
        await asyncio.gather(*self._batches, return_exceptions=True)
        await self._stack.aclose()
        self._pipeline = None

    async def _ready(self) -> Pipeline:
        if self._pipeline is None:
            self._pipeline = await self._stack.enter_async_context(open_pipeline(self._job))
        return self._pipeline

    def _counters(self) -> dict[str, Any]:
        vlm = self._pipeline.vlm if self._pipeline is not None else None
        return {} if vlm is None else vlm.stats.snapshot()
