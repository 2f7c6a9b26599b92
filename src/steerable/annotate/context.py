"""What a module sees of one episode: frames, timestamps, task, the VLM, upstream output."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from steerable.dataset import EpisodeMeta, LeRobotDataset
from steerable.vlm.protocol import VLMClient

__all__ = ["EpisodeContext", "FrameCache", "seeded_rng"]


def seeded_rng(seed: int, episode_index: int, purpose: str) -> np.random.Generator:
    """Randomness keyed by (seed, episode, purpose): stable across runs, order and machines."""
    digest = hashlib.blake2b(f"{seed}:{episode_index}:{purpose}".encode(), digest_size=8).digest()
    return np.random.default_rng(int.from_bytes(digest, "big"))


class FrameCache:
    """Decodes an episode's frames off the event loop, one pass for every request made meanwhile.

    Decoding runs in a worker thread (PyAV releases the GIL) so the event loop keeps the VLM busy.
    Requests that arrive while a pass for the same camera waits for a decode slot, or is running,
    share it: modules that start together (plan and vqa) ask for overlapping times, and one pass
    over the union costs about as much as the largest of them. A delivered frame is shared by every
    requester, so callers must not edit frames in place.

    With `retain` (off by default) decoded frames are kept for later requests; off, the cache holds
    a frame only until it is delivered, so each module keeps only the frames it asked for, and only
    as long as it needs them: frames dominate the memory of a run (a VGA frame is 0.9 MB).
    """

    def __init__(
        self,
        dataset: LeRobotDataset,
        episode: EpisodeMeta,
        *,
        retain: bool = False,
        gate: asyncio.Semaphore | None = None,
    ) -> None:
        self._dataset = dataset
        self._episode = episode
        self._retain = retain
        # Shared by every episode of a run: more decodes at once than cores only adds memory
        # (each decode holds its frames and the codec's buffers), not speed.
        self._gate = gate or asyncio.Semaphore(1)
        self._frames: dict[tuple[str, float], np.ndarray] = {}
        self._pending: dict[tuple[str, float], asyncio.Future[np.ndarray]] = {}  # queued or decoding
        self._queued: dict[str, set[float]] = {}  # per camera: times no pass has taken yet
        self._tasks: set[asyncio.Task[None]] = set()
        self.passes = 0  # decode passes made (one per camera and batch of requests)

    async def get(self, camera: str, timestamps: Sequence[float]) -> list[np.ndarray]:
        """The frames shown at `timestamps` (stored times), in request order."""
        wanted = sorted({float(t) for t in timestamps})
        new = [t for t in wanted if (camera, t) not in self._frames and (camera, t) not in self._pending]
        if new:
            loop = asyncio.get_running_loop()
            for t in new:
                self._pending[(camera, t)] = loop.create_future()
            if camera not in self._queued:
                self._queued[camera] = set()
                task = loop.create_task(self._pass(camera))
                self._tasks.add(task)  # the loop keeps only weak references to tasks
                task.add_done_callback(self._tasks.discard)
            self._queued[camera].update(new)
        by_time = {t: self._frames[(camera, t)] for t in wanted if (camera, t) in self._frames}
        waits = {t: self._pending[(camera, t)] for t in wanted if t not in by_time}
        if waits:
            done = await asyncio.gather(*waits.values())
            by_time.update(zip(waits, done, strict=True))
        return [by_time[float(t)] for t in timestamps]

    async def _pass(self, camera: str) -> None:
        """One decode pass over every time queued for `camera` by the time a decode slot is free."""
        times: list[float] = []
        try:
            async with self._gate:
                await asyncio.sleep(0)  # let requests made in the same loop turn join this pass
                times = sorted(self._queued.pop(camera))
                self.passes += 1
                frames = await asyncio.to_thread(
                    self._dataset.decode_frames, self._episode.episode_index, camera, times
                )
        except BaseException as exc:
            times = times or sorted(self._queued.pop(camera, ()))
            for t in times:
                future = self._pending.pop((camera, t))
                if future.done():
                    continue
                if isinstance(exc, Exception):
                    future.set_exception(exc)
                    future.exception()  # a requester that gave up must not leave it unretrieved
                else:
                    future.cancel()
            if not isinstance(exc, Exception):
                raise
            return
        for t, frame in zip(times, frames, strict=True):
            if self._retain:
                self._frames[(camera, t)] = frame
            future = self._pending.pop((camera, t))
            if not future.done():
                future.set_result(frame)

    def release(self) -> None:
        self._frames.clear()


@dataclass
class EpisodeContext:
    dataset: LeRobotDataset
    episode: EpisodeMeta
    timestamps: np.ndarray  # stored float32 frame timestamps, frame order
    task: str  # the dataset's task; modules read `effective_task` for the one in force
    seed: int
    vlm: VLMClient | None = None  # None when no model is configured
    camera: str | None = None  # default camera for plan / interjections
    frames: FrameCache | None = None
    upstream: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    upstream_meta: dict[str, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def for_episode(
        cls,
        dataset: LeRobotDataset,
        episode_index: int,
        *,
        seed: int,
        vlm: VLMClient | None = None,
        camera: str | None = None,
        decodes: asyncio.Semaphore | None = None,
        **extra: Any,
    ) -> EpisodeContext:
        """A context for one episode: its stored timestamps and task read, a frame source attached.

        Reads parquet, so the engine calls it in a worker thread. `extra` sets any other field
        (task, upstream, upstream_meta).
        """
        ep = dataset.episode(episode_index)
        values: dict[str, Any] = {
            "task": dataset.task_of(ep),
            "frames": FrameCache(dataset, ep, gate=decodes),
            **extra,
        }
        return cls(
            dataset=dataset,
            episode=ep,
            timestamps=dataset.episode_timestamps(ep.episode_index),
            seed=seed,
            vlm=vlm,
            camera=camera,
            **values,
        )

    @property
    def episode_index(self) -> int:
        return self.episode.episode_index

    @property
    def duration(self) -> float:
        return float(self.timestamps[-1]) if len(self.timestamps) else 0.0

    @property
    def effective_task(self) -> str:
        return str(self.upstream_meta.get("plan", {}).get("effective_task") or self.task)

    def rng(self, purpose: str) -> np.random.Generator:
        return seeded_rng(self.seed, self.episode_index, purpose)

    def frame_time(self, t: float) -> float:
        """The stored timestamp of the frame nearest to `t` (what event rows must carry)."""
        if len(self.timestamps) == 1:
            return float(self.timestamps[0])
        i = int(np.clip(np.searchsorted(self.timestamps, t), 1, len(self.timestamps) - 1))
        j = i - 1 if abs(self.timestamps[i - 1] - t) <= abs(self.timestamps[i] - t) else i
        return float(self.timestamps[j])

    def sample_times(self, fps: float, start: float = 0.0, end: float | None = None) -> list[float]:
        """Stored frame timestamps sampled at about `fps` over [start, end]."""
        end = self.duration if end is None else end
        if fps <= 0 or len(self.timestamps) == 0:
            return []
        count = max(1, int(np.floor((end - start) * fps)) + 1)
        wanted = np.linspace(start, start + (count - 1) / fps, count)
        return sorted({self.frame_time(float(t)) for t in wanted if t <= end + 1e-9})
