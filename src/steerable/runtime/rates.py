"""The control loop's rates: the configured ones (`LoopRates`), its counters (`LoopStats`) and the
rates it measures over a recent window of loop time (`RecentEvents`)."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Literal

__all__ = ["LoopRates", "LoopStats", "RateName", "RecentEvents"]

# What the loop times: ticks, chunk inferences and high-level calls (named after their rate).
RateName = Literal["ctrl_hz", "chunk_hz", "high_level_hz"]


@dataclass(frozen=True)
class LoopRates:
    """Dispatch (control) rate, chunk-inference rate and high-level update rate, in Hz."""

    ctrl_hz: float = 15.0
    chunk_hz: float = 5.0
    high_level_hz: float = 1.0


@dataclass
class LoopStats:
    ticks: int = 0
    chunks: int = 0
    high_level_calls: int = 0
    high_level_failures: int = 0
    high_level_discarded: int = 0  # replies that came back for an older revision
    tick_seconds: list[float] = field(default_factory=list)  # work per tick
    lateness: list[float] = field(default_factory=list)  # how late each tick started (wall clock)


class RecentEvents:
    """When ticks, chunk inferences and high-level calls happened (loop time), for measured rates."""

    def __init__(self) -> None:
        self._times: dict[RateName, deque[float]] = {"ctrl_hz": deque(), "chunk_hz": deque(), "high_level_hz": deque()}

    def mark(self, name: RateName, now: float) -> None:
        """One `name` event happened at loop time `now`."""
        self._times[name].append(now)

    def rates(self, now: float, window_s: float) -> dict[str, float]:
        """Events per second of each kind over the last `window_s` before `now`; older ones are dropped."""
        span = max(min(window_s, now), 1e-9)
        out: dict[str, float] = {}
        for name, times in self._times.items():
            while times and times[0] < now - window_s:
                times.popleft()
            out[name] = len(times) / span
        return out
