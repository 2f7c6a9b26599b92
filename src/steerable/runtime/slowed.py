"""A controller made slow on purpose: every chunk takes at least a given time.

`--inference` benchmarks and the async-vs-sync success check need a policy whose chunk takes 100-300
ms. On the wall clock the wrapper sleeps the rest of that time; on the virtual clock it only declares
it as its `latency_s`, which `steerable.runtime.chunks` holds each chunk back by. What the wrapped
controller is (images wanted, per-tick, able to continue a chunk) shows through unchanged.
"""

from __future__ import annotations

import time

from steerable.control import ActionChunk, ChunkPrefix, ContinuesChunks, LowLevelController, Observation

__all__ = ["slowed_to"]


class _Slowed:
    """`low`, each chunk taking at least `seconds` (see `slowed_to`)."""

    def __init__(self, low: LowLevelController, seconds: float, sleep: bool) -> None:
        self.low, self.seconds, self.sleep = low, seconds, sleep
        self.name = f"{low.name}, slowed to {seconds * 1000:.0f} ms a chunk"
        self.latency_s = max(seconds, float(getattr(low, "latency_s", 0.0)))

    @property
    def wants_images(self) -> bool:
        return bool(getattr(self.low, "wants_images", True))

    @property
    def every_tick(self) -> bool:  # a per-tick policy (LeRobot's select_action) stays per-tick when slowed
        return bool(getattr(self.low, "every_tick", False))

    def _wait(self, started: float) -> None:
        left = self.seconds - (time.perf_counter() - started)
        if self.sleep and left > 0:
            time.sleep(left)

    def act(self, observation: Observation, command: str) -> ActionChunk:
        started = time.perf_counter()
        chunk = self.low.act(observation, command)
        self._wait(started)
        return chunk

    def reset(self) -> None:
        self.low.reset()


class _SlowedContinuing(_Slowed):
    def act_continuing(self, observation: Observation, command: str, prefix: ChunkPrefix) -> ActionChunk:
        assert isinstance(self.low, ContinuesChunks)
        started = time.perf_counter()
        chunk = self.low.act_continuing(observation, command, prefix)
        self._wait(started)
        return chunk


def slowed_to(low: LowLevelController, seconds: float, *, sleep: bool) -> LowLevelController:
    """`low` with every chunk taking at least `seconds`: slept (`sleep`, the wall clock) or only
    declared as its `latency_s` (the virtual clock holds each chunk back that long)."""
    slow = _SlowedContinuing(low, seconds, sleep) if isinstance(low, ContinuesChunks) else _Slowed(low, seconds, sleep)
    return slow
