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
    """Decodes an episode's frames in one sequential pass per request, off the event loop.

    Decoding runs in a worker thread (PyAV releases the GIL) so the event loop keeps the VLM busy.
    With `retain` (off by default) decoded frames are kept for later requests; off, each module
    holds only the frames it asked for, and only as long as it needs them: frames dominate the
    memory of a run (a VGA frame is 0.9 MB), while a second decode pass costs little CPU.
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
        self._lock = asyncio.Lock()

    async def get(self, camera: str, timestamps: Sequence[float]) -> list[np.ndarray]:
        wanted = sorted({float(t) for t in timestamps})
        if not self._retain:
            decoded = await self._decode(camera, wanted)
            by_time = dict(zip(wanted, decoded, strict=True))
            return [by_time[float(t)] for t in timestamps]
        async with self._lock:
            missing = [t for t in wanted if (camera, t) not in self._frames]
            if missing:
                decoded = await self._decode(camera, missing)
                for t, frame in zip(missing, decoded, strict=True):
                    self._frames[(camera, t)] = frame
        return [self._frames[(camera, float(t))] for t in timestamps]

    async def _decode(self, camera: str, times: list[float]) -> list[np.ndarray]:
        async with self._gate:
            return await asyncio.to_thread(self._dataset.decode_frames, self._episode.episode_index, camera, times)

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
