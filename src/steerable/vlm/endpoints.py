"""A pool of VLM servers: episode affinity for prefix-cache reuse, health marks for failover.

Calls carrying the same affinity key (an episode) go to the same server, chosen by rendezvous
hashing, so its prefix cache holds that episode's images. When that server dies, only its keys move,
each to its next-ranked server; the others keep their placement. Calls without a key go to the
least-loaded healthy server.
"""

from __future__ import annotations

import hashlib
import itertools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

__all__ = ["Endpoint", "EndpointPool"]

C = TypeVar("C")

_SOFT_FAILURES_BEFORE_DOWN = 3  # timeouts / 5xx in a row; one refused connection is enough


@dataclass(eq=False)
class Endpoint(Generic[C]):
    """One server: its URL, the backend's client handle for it, and its health."""

    url: str
    client: C
    in_flight: int = 0
    down_until: float = 0.0
    consecutive_failures: int = 0
    timeouts: int = 0  # requests timed out since its last reply
    given_up: str | None = None  # why it is never picked again (it stopped answering), None while in use


class EndpointPool(Generic[C]):
    """Chooses an endpoint per request and tracks which ones are down."""

    def __init__(
        self,
        endpoints: Sequence[Endpoint[C]],
        *,
        cooldown_s: float = 2.0,
        max_cooldown_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not endpoints:
            raise ValueError("an endpoint pool needs at least one endpoint")
        self.endpoints = list(endpoints)
        self._cooldown_s = cooldown_s
        self._max_cooldown_s = max_cooldown_s
        self._clock = clock
        self._turn = itertools.count()

    def is_up(self, endpoint: Endpoint[C]) -> bool:
        """Whether the endpoint is not in a failure cooldown."""
        return endpoint.down_until <= self._clock()

    def pick(self, affinity: str | None = None, *, exclude: Sequence[Endpoint[C]] = ()) -> Endpoint[C] | None:
        """The endpoint for the next request, or None when every endpoint is excluded or given up.

        When all remaining endpoints are down, the one whose cooldown ends first is returned, so the
        request doubles as a probe instead of failing without trying.
        """
        candidates = [e for e in self.endpoints if e not in exclude and e.given_up is None]
        if not candidates:
            return None
        if affinity is not None:
            candidates.sort(key=lambda e: _rank(affinity, e.url), reverse=True)
        else:
            # Rotate before taking the least loaded, so ties spread over servers.
            start = next(self._turn) % len(candidates)
            rotated = candidates[start:] + candidates[:start]
            candidates = sorted(rotated, key=lambda e: e.in_flight)
        for endpoint in candidates:
            if self.is_up(endpoint):
                return endpoint
        return min(candidates, key=lambda e: e.down_until)

    def mark_ok(self, endpoint: Endpoint[C]) -> None:
        """A request succeeded: the endpoint is healthy again."""
        endpoint.consecutive_failures = 0
        endpoint.down_until = 0.0

    def mark_failed(self, endpoint: Endpoint[C], *, hard: bool) -> None:
        """A request failed; `hard` (refused connection) takes the endpoint out at once."""
        endpoint.consecutive_failures += 1
        if hard or endpoint.consecutive_failures >= _SOFT_FAILURES_BEFORE_DOWN:
            doublings = min(endpoint.consecutive_failures - 1, 8)
            cooldown = min(self._max_cooldown_s, self._cooldown_s * 2**doublings)
            endpoint.down_until = self._clock() + cooldown


def _rank(affinity: str, url: str) -> int:
    """Rendezvous-hash weight of (key, server): stable across runs and processes."""
    digest = hashlib.blake2b(f"{affinity}\x00{url}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")
