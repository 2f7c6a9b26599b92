"""Fault injection for the test server: which request fails, and how, reproducibly per seed."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field

__all__ = ["FAULT_KINDS", "FaultPlan"]

# timeout: stall past the client's timeout; http_500: server error; truncated: JSON cut mid-way
# (finish_reason "length"); invalid_json: prose that is not JSON; schema_violation: valid JSON of
# the wrong shape.
FAULT_KINDS = ("timeout", "http_500", "truncated", "invalid_json", "schema_violation")


@dataclass
class FaultPlan:
    """Faults by request arrival order: `script` for the first requests, then `rate` over `kinds`.

    The n-th request's fault depends only on (seed, n), so a run with the same seed and the same
    arrival order sees the same faults.
    """

    rate: float = 0.0
    kinds: Sequence[str] = FAULT_KINDS
    seed: int = 0
    script: Sequence[str | None] = ()
    timeout_s: float = 30.0  # how long a 'timeout' fault stalls before answering
    _served: int = field(default=0, init=False, repr=False)
    _rng: random.Random = field(init=False, repr=False)

    def __post_init__(self) -> None:
        unknown = sorted({k for k in [*self.kinds, *self.script] if k is not None} - set(FAULT_KINDS))
        if unknown:
            raise ValueError(f"unknown fault kinds {unknown}; choose from {list(FAULT_KINDS)}")
        if not 0.0 <= self.rate <= 1.0:
            raise ValueError(f"fault rate must be within [0, 1], got {self.rate}")
        if self.rate > 0 and not self.kinds:
            raise ValueError("a fault rate needs at least one fault kind")
        self._rng = random.Random(self.seed)

    def next(self) -> str | None:
        """The fault for the next request, or None for a normal reply."""
        n = self._served
        self._served += 1
        if n < len(self.script):
            return self.script[n]
        # Draw both numbers every time so the sequence doesn't depend on earlier outcomes.
        roll, pick = self._rng.random(), self._rng.randrange(max(1, len(self.kinds)))
        return self.kinds[pick] if roll < self.rate else None
