"""The Ray executor: the driver splits episodes into batches and runs them in Ray actors.

Each actor (`EpisodeWorker`) opens the pipeline once, against the VLM endpoints it is given
(`--vlm.base_url` split across actors; with `--vlm.backend vllm` it launches its own replica), and
streams every finished episode back. Staging is the run's staging folder, which every actor must
see (one machine: a local path; a cluster: a shared mount). The driver validates, writes and
summarizes exactly as for the local executor (`steerable.annotate.run`).

Faults: when an actor dies, the episodes of its batches that it had not reported go back to the
queue and run on another actor (a replacement is started while `--executor.max_restarts` allows);
finished episodes are never redone, and modules staged before the death are reused.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import socket
from collections import deque
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from steerable.annotate.config import ExecutorConfig
from steerable.annotate.engine import EpisodeResult, Progress
from steerable.annotate.executor import EpisodeJob, Session, merge_stats
from steerable.distributed.worker import EpisodeWorker, WorkerInfo
from steerable.errors import ConfigError, MissingExtraError, SteerableError
from steerable.processes import keep_termination_handlers

if TYPE_CHECKING:
    from steerable.dataset import EpisodeMeta, LeRobotDataset
    from steerable.vlm.config import VLMConfig
    from steerable.vlm.protocol import VLMClient, VLMStats

__all__ = ["BATCHES_IN_FLIGHT", "RayExecutor", "WorkersLost", "endpoints_for", "replica_settings"]

log = logging.getLogger(__name__)

BATCHES_IN_FLIGHT = 2  # per actor: one batch ramps up (decoding) while the other drains


class WorkersLost(SteerableError):
    """Every Ray actor died and no replacement may be started: the run cannot finish."""


def _ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise MissingExtraError("ray", "ray") from exc
    return ray


def endpoints_for(urls: Sequence[str], worker: int, workers: int) -> list[str]:
    """The VLM URLs actor `worker` talks to: its share when there are more URLs than actors, else
    one URL, round robin (several actors then share a server)."""
    if not urls:
        return []
    if len(urls) >= workers:
        return [u for j, u in enumerate(urls) if j % workers == worker]
    return [urls[worker % len(urls)]]


def replica_settings(vlm: VLMConfig, worker: int, worker_gpus: float) -> dict[str, Any]:
    """Actor `worker`'s own vLLM ports and log folder, so that actors sharing a node never collide.

    Its replicas listen from `serve_port + worker * k` on, k being the replicas one actor starts
    (`--vlm.parallel_servers`, else `--vlm.num_gpus`, else one per GPU it reserves).
    """
    per_actor = vlm.parallel_servers or vlm.num_gpus or max(1, math.ceil(worker_gpus))
    update: dict[str, Any] = {"serve_port": vlm.serve_port + worker * per_actor}
    if vlm.log_dir is not None:
        update["log_dir"] = vlm.log_dir / f"worker-{worker}"
    return update


@dataclass
class _Seat:
    """One actor slot; its actor is replaced when it dies."""

    index: int
    job: EpisodeJob
    handle: Any = None
    counters: dict[str, Any] = field(default_factory=dict)


class _RaySession:
    def __init__(self, config: ExecutorConfig, job: EpisodeJob, workers: int) -> None:
        self._config = config
        self._job = job
        self._count = workers
        self._seats: list[_Seat] = []
        self._retired: list[dict[str, Any]] = []  # last counters of dead actors (their calls count)
        self._restarts_left = config.max_restarts
        self._info: WorkerInfo = ([], [], None)

    # -- what the driver reads -------------------------------------------------------------
    @property
    def modules(self) -> list[str]:
        return list(self._info[0])

    @property
    def notes(self) -> list[str]:
        return list(self._info[1])

    @property
    def model_id(self) -> str | None:
        return self._info[2]

    @property
    def stats(self) -> VLMStats | None:
        if self.model_id is None:
            return None
        return merge_stats([*self._retired, *(s.counters for s in self._seats)])

    def live_workers(self) -> list[Any]:
        """The live actor handles (tests kill one to check fault handling)."""
        return [s.handle for s in self._seats if s.handle is not None]

    # -- lifecycle ---------------------------------------------------------------------------
    async def start(self) -> None:
        cfg = self._job.cfg
        for i in range(self._count):
            vlm = cfg.vlm.model_copy(update={"base_url": endpoints_for(cfg.vlm.base_url, i, self._count)})
            if cfg.vlm.backend == "vllm":
                vlm = vlm.model_copy(update=replica_settings(vlm, i, self._config.worker_gpus))
            self._seats.append(_Seat(i, replace(self._job, cfg=cfg.model_copy(update={"vlm": vlm}))))
        infos = await asyncio.gather(*(self._spawn(seat) for seat in self._seats))
        self._info = infos[0]

    async def _spawn(self, seat: _Seat) -> WorkerInfo:
        ray = _ray()
        actor = _actor_class(ray).options(
            num_cpus=self._config.worker_cpus, num_gpus=self._config.worker_gpus, max_restarts=0
        )
        seat.handle = actor.remote(seat.job)
        seat.counters = {}
        try:
            info: WorkerInfo = await seat.handle.setup.remote()
        except ray.exceptions.RayTaskError as exc:
            raise _cause(exc) from None
        return info

    async def stop(self) -> None:
        ray = _ray()
        for seat in self._seats:
            if seat.handle is None:
                continue
            with contextlib.suppress(Exception):
                await asyncio.wait_for(seat.handle.close.remote(), timeout=30)
            with contextlib.suppress(Exception):
                ray.kill(seat.handle)
            seat.handle = None

    # -- episodes ------------------------------------------------------------------------------
    async def run(self, episodes: Sequence[EpisodeMeta], progress: Progress) -> list[EpisodeResult]:
        progress.total = len(episodes)
        indices = [ep.episode_index for ep in episodes]
        size = self._config.batch_episodes or max(1, math.ceil(len(indices) / (self._count * 4)))
        pending: deque[list[int]] = deque(indices[i : i + size] for i in range(0, len(indices), size))
        results: dict[int, EpisodeResult] = {}
        while pending:
            seats = [s for s in self._seats if s.handle is not None]
            if not seats:
                raise WorkersLost(
                    f"every Ray worker died and --executor.max_restarts {self._config.max_restarts} "
                    f"is used up; {len(indices) - len(results)} episode(s) not run (staged work is kept: "
                    "re-run the same command to resume)"
                )
            await asyncio.gather(*(self._serve(seat, pending, results, progress) for seat in seats))
        for seat in self._seats:  # final counters (those streamed with results lag behind)
            if seat.handle is not None:
                with contextlib.suppress(_ray().exceptions.RayActorError):
                    seat.counters = await seat.handle.counters.remote()
        return [results[i] for i in indices]

    async def _serve(
        self, seat: _Seat, pending: deque[list[int]], results: dict[int, EpisodeResult], progress: Progress
    ) -> None:
        """Feed batches to the seat's actor until the queue is empty; replace the actor if it dies."""
        while pending and seat.handle is not None:
            died = await asyncio.gather(
                *(self._slot(seat, pending, results, progress) for _ in range(BATCHES_IN_FLIGHT))
            )
            if not any(died):
                continue
            self._retired.append(seat.counters)
            seat.handle = None
            if self._restarts_left <= 0:
                log.warning("Ray worker %d died; no restarts left, its episodes go to the others", seat.index)
                return
            self._restarts_left -= 1
            log.warning("Ray worker %d died; starting a replacement (its unfinished episodes are retried)", seat.index)
            await self._spawn(seat)

    async def _slot(
        self, seat: _Seat, pending: deque[list[int]], results: dict[int, EpisodeResult], progress: Progress
    ) -> bool:
        """Run batches one after another on the seat's actor; True when the actor died."""
        ray = _ray()
        modules = len(self.modules)
        while pending and seat.handle is not None:
            batch = pending.popleft()
            left = set(batch)
            progress.running += len(batch)
            try:
                stream = seat.handle.run_batch.options(num_returns="streaming").remote(batch)
                async for ref in stream:
                    result, counters = await ref
                    seat.counters = counters
                    results[result.episode_index] = result
                    left.discard(result.episode_index)
                    progress.running -= 1
                    progress.record(result, modules)
            except ray.exceptions.RayActorError:
                progress.running -= len(left)
                pending.appendleft(sorted(left))  # only the unreported episodes; staging keeps the rest
                return True
            except ray.exceptions.RayTaskError as exc:
                raise _cause(exc) from None
        return False


_ACTOR: list[Any] = []


def _actor_class(ray: Any) -> Any:
    """`EpisodeWorker` as a Ray actor class, made once per process."""
    if not _ACTOR:
        _ACTOR.append(ray.remote(EpisodeWorker))
    return _ACTOR[0]


def _cause(exc: Any) -> BaseException:
    """A worker's own error as the driver's (so a user error stays one line, exit 2)."""
    cause = getattr(exc, "cause", None)
    return cause if isinstance(cause, BaseException) else exc


class RayExecutor:
    """Episodes run in Ray actors: `--executor.backend ray [--executor.address auto|HOST:PORT]`.

    Without an address (and no Ray already initialised in this process) a local cluster is started
    for the run and stopped after it.
    """

    def __init__(self, config: ExecutorConfig | None = None) -> None:
        self.config = config or ExecutorConfig(backend="ray")
        self.session: _RaySession | None = None  # the open session (tests reach the actors here)

    @contextlib.asynccontextmanager
    async def open(
        self, job: EpisodeJob, dataset: LeRobotDataset, injected: VLMClient | None
    ) -> AsyncIterator[Session]:
        if injected is not None:
            raise ConfigError(
                "--executor.backend ray builds its VLM clients on the workers from --vlm.*; "
                "an in-process client cannot be sent to them"
            )
        ray = _ray()
        started = False
        if not ray.is_initialized():
            _check_reachable(self.config.address)
            try:
                with keep_termination_handlers():  # SIGTERM stays a Ctrl-C: the finally below shuts Ray down
                    ray.init(address=self.config.address, logging_level=logging.WARNING, include_dashboard=False)
            except ConnectionError as exc:
                raise ConfigError(f"--executor.address {self.config.address}: no Ray cluster there ({exc})") from None
            started = True
        session = _RaySession(self.config, job, self.config.workers or _nodes(ray))
        self.session = session
        try:
            await session.start()
            yield session
        finally:
            await session.stop()
            self.session = None
            if started:
                ray.shutdown()


def _check_reachable(address: str | None) -> None:
    """Fail in seconds, not after Ray's minute of reconnecting, when HOST:PORT answers nothing."""
    if address is None or address == "auto":
        return
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        raise ConfigError(f"--executor.address {address!r}: expected auto or HOST:PORT (the head's GCS port)")
    try:
        socket.create_connection((host, int(port)), timeout=5).close()
    except OSError as exc:
        raise ConfigError(
            f"--executor.address {address}: no Ray cluster answers there ({exc.strerror or exc}); "
            "start one with `ray start --head`, or drop the flag for a local cluster"
        ) from None


def _nodes(ray: Any) -> int:
    return max(1, sum(1 for node in ray.nodes() if node.get("Alive")))
