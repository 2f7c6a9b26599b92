"""The global in-flight limit, served by priority instead of arrival order.

Callers set `call_priority` (a context variable, so it flows into every task a module spawns);
lower values go first, ties in arrival order. The annotation engine gives calls on an episode's
critical path (plan, then interjections) precedence over bulk independent calls (vqa), and older
episodes precedence over newer ones, so the server is not left idle waiting on a long sequential
chain at the end of a run.
"""

from __future__ import annotations

import asyncio
import contextvars
import heapq
import itertools
from types import TracebackType

__all__ = ["PriorityLimiter", "call_priority"]

call_priority: contextvars.ContextVar[tuple[int, ...]] = contextvars.ContextVar("call_priority", default=(0,))


class PriorityLimiter:
    """An async context manager admitting at most `limit` holders; waiters leave by priority."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError("limit must be at least 1")
        self._free = limit
        self._waiters: list[tuple[tuple[int, ...], int, asyncio.Future[None]]] = []
        self._order = itertools.count()

    async def acquire(self) -> None:
        if self._free > 0 and not self._waiters:
            self._free -= 1
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiters, (call_priority.get(), next(self._order), future))
        try:
            await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():
                self.release()  # we were granted a slot just as we got cancelled: pass it on
            raise

    def release(self) -> None:
        while self._waiters:
            _, _, future = heapq.heappop(self._waiters)
            if not future.done():
                future.set_result(None)
                return
        self._free += 1

    async def __aenter__(self) -> None:
        await self.acquire()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()
