"""The learning-rate schedule of `steerable train`, and when a run ends.

Linear warm-up, then a cosine decay to a tenth of the peak by the end of the run. The end is `--steps`, or,
with `--time_budget`, whichever of the steps and the time runs out first: the decay follows the larger of
the two fractions spent, so a run cut by its time still ends at the low learning rate where a run's weights
settle (a run stopped from outside, as a benchmark's budget does, ends near the peak instead). The time is
wall-clock seconds of the training loop, or with `--time_clock cpu` CPU seconds of the process (what a
budget on a shared machine should count); a resumed run goes on from the time its checkpoint had spent.
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass, field

__all__ = ["Schedule", "lr_factor", "parse_duration"]

_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}
_DURATION = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*(s|m|min|h)?\s*")


def parse_duration(value: object) -> float | None:
    """Seconds from 90, '90', '90s', '20m', '1.5h' (None and '' stay None); ValueError otherwise."""
    if value is None or value == "":
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value)
    else:
        match = _DURATION.fullmatch(str(value))
        if match is None:
            raise ValueError(f"{value!r} is not a duration: a number of seconds, or with s, m or h (90, 20m, 1.5h)")
        seconds = float(match.group(1)) * _UNITS[match.group(2) or ""]
    if not math.isfinite(seconds) or seconds <= 0:
        raise ValueError(f"a duration must be positive, got {value!r}")
    return seconds


def lr_factor(step: int, warmup: int, progress: float) -> float:
    """The learning rate of step `step` (0-based) as a share of the peak, `progress` the run's share spent."""
    if step < warmup:
        return (step + 1) / warmup
    return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, max(0.0, progress))))


@dataclass
class Schedule:
    """One run's schedule: `steps` at most, `budget_s` seconds of `clock` at most (None: no time limit),
    `spent_s` already spent by the checkpoint it resumes. `seen(seconds)` sets the time spent so far (under
    several processes, their agreed figure); `factor` and `over` read it."""

    steps: int
    warmup: int
    budget_s: float | None = None
    clock: str = "wall"
    spent_s: float = 0.0
    _started: float = field(init=False, default=0.0)
    _now: float = field(init=False, default=0.0)

    def __post_init__(self) -> None:
        if self.clock not in ("wall", "cpu"):
            raise ValueError(f"clock must be wall or cpu, got {self.clock!r}")
        self._started = self._read()
        self._now = self.spent_s

    def _read(self) -> float:
        return time.process_time() if self.clock == "cpu" else time.perf_counter()

    def elapsed(self) -> float:
        """Seconds spent: the resumed checkpoint's and this process's since the schedule was made."""
        return self.spent_s + self._read() - self._started

    def seen(self, seconds: float) -> None:
        self._now = seconds

    @property
    def spent(self) -> float:
        return self._now

    def progress(self, step: int) -> float:
        """The share of the run spent at `step`: of the steps after warm-up, or of the time, the larger."""
        by_steps = (step - self.warmup) / max(1, self.steps - self.warmup)
        by_time = self._now / self.budget_s if self.budget_s else 0.0
        return max(by_steps, by_time)

    def factor(self, step: int) -> float:
        return lr_factor(step, self.warmup, self.progress(step))

    def over(self, step: int) -> bool:
        """Whether the run ends once `step` steps are done: the steps reached, or the time spent."""
        return step >= self.steps or (self.budget_s is not None and self._now >= self.budget_s)

    def sooner_end(self, eta_s: float | None) -> float | None:
        """Seconds to the run's end: `eta_s` (to its last step) or what is left of the time budget, the sooner."""
        if self.budget_s is None:
            return eta_s
        left = max(0.0, self.budget_s - self._now)
        return left if eta_s is None else min(eta_s, left)
