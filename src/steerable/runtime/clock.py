"""Time for the control loop: a wall clock paced at the control rate, or a virtual clock.

The virtual clock advances by exactly one control period per tick and never sleeps, so evaluation
and scripted runs go as fast as the CPU allows while every rate gate sees the same times it would
see live. `RateGate` fires at most `hz` times per second of the clock it reads.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

__all__ = ["Clock", "RateGate", "RetryBackoff", "VirtualClock", "WallClock"]


class Clock:
    """Ticks at `hz`; `now()` is seconds since start."""

    def __init__(self, hz: float) -> None:
        if hz <= 0:
            raise ValueError(f"the control rate must be positive, got {hz}")
        self.hz = hz
        self.period = 1.0 / hz
        self.ticks = 0

    def now(self) -> float:
        raise NotImplementedError

    def wait_next(self) -> float:
        """Wait until the next tick is due; returns how late it started (seconds, 0 for virtual)."""
        raise NotImplementedError


class VirtualClock(Clock):
    def now(self) -> float:
        return self.ticks * self.period

    def wait_next(self) -> float:
        self.ticks += 1
        return 0.0


class WallClock(Clock):
    """Deadline-based pacing: tick k is due at start + k * period, so lateness does not accumulate."""

    def __init__(self, hz: float) -> None:
        super().__init__(hz)
        self._start = time.perf_counter()

    def now(self) -> float:
        return time.perf_counter() - self._start

    def wait_next(self) -> float:
        self.ticks += 1
        due = self._start + self.ticks * self.period
        delay = due - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        late = time.perf_counter() - due
        if late > self.period:  # fell a whole period behind: restart the schedule rather than burst
            self._start += late
        return max(late, 0.0)


@dataclass
class RateGate:
    """`due(now)` is True at most `hz` times per second; `rearm()` makes the next check due."""

    hz: float
    _last: float | None = field(default=None, repr=False)

    def due(self, now: float, *, force: bool = False) -> bool:
        if force or self._last is None or now - self._last >= 1.0 / max(self.hz, 1e-6) - 1e-9:
            self._last = now
            return True
        return False

    def rearm(self) -> None:
        self._last = None


@dataclass
class RetryBackoff:
    """When to try again after failures in a row: `base_s` after the first, doubling up to `max_s`.

    `failed(now)` counts one more failure, `succeeded()` and `rearm()` clear the count, and
    `due(now)` says whether the wait after the last failure is over (always, with no failure).
    """

    base_s: float
    max_s: float
    failures: int = 0
    _next: float = field(default=float("-inf"), repr=False)

    def failed(self, now: float) -> None:
        """Count a failure at `now`: the next try is due one wait later."""
        self.failures += 1
        self._next = now + min(self.base_s * 2 ** (self.failures - 1), self.max_s)

    def succeeded(self) -> None:
        self.failures, self._next = 0, float("-inf")

    rearm = succeeded

    def due(self, now: float) -> bool:
        return now >= self._next - 1e-9
