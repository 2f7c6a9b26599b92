"""The live progress display of an annotation run (episodes, calls in flight, rates, ETA)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import time
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.table import Table

from steerable.annotate.engine import Progress

__all__ = ["ProgressDisplay", "vlm_counters"]

log = logging.getLogger(__name__)


def vlm_counters(vlm: Any | None) -> dict[str, float]:
    """The client's counters as plain numbers (empty when there is no model)."""
    stats = getattr(vlm, "stats", None)
    if stats is None:
        return {}
    if hasattr(stats, "snapshot"):
        data = stats.snapshot()
    elif hasattr(stats, "model_dump"):
        data = stats.model_dump()
    else:
        data = dict(vars(stats))
    return {k: v for k, v in data.items() if isinstance(v, int | float)}


class ProgressDisplay:
    """Refreshes a small table a few times a second on a terminal; logs a line now and then otherwise."""

    def __init__(self, progress: Progress, vlm: Any | None, *, enabled: bool = True) -> None:
        self.progress = progress
        self.vlm = vlm
        self.console = Console(stderr=True)
        self.enabled = enabled and sys.stderr.isatty()
        self._task: asyncio.Task[None] | None = None

    def _table(self) -> Table:
        p = self.progress
        elapsed = max(time.monotonic() - p.started_at, 1e-6)
        finished = p.done + p.failed
        worked = max(finished - p.resumed, 0)
        rate = worked / elapsed
        remaining = p.total - finished
        eta = f"{remaining / rate:.0f} s" if rate > 0 and remaining else "-"
        c = vlm_counters(self.vlm)
        table = Table.grid(padding=(0, 2))
        table.add_row(
            f"episodes {finished}/{p.total}",
            f"done {p.done}",
            f"failed {p.failed}",
            f"resumed {p.resumed}",
            f"running {p.running}",
            f"ETA {eta}",
        )
        if c:
            calls = c.get("calls", 0)
            tokens = c.get("completion_tokens", 0) + c.get("prompt_tokens", 0)
            table.add_row(
                f"VLM calls {int(calls)}",
                f"in flight {int(c.get('in_flight', 0))}",
                f"{calls / elapsed:.1f} calls/s",
                f"{tokens / elapsed:.0f} tok/s",
                f"retries {int(c.get('retries', 0))}",
                "",
            )
        return table

    async def _loop(self) -> None:
        if self.enabled:
            with Live(self._table(), console=self.console, refresh_per_second=4, transient=False) as live:
                while True:
                    await asyncio.sleep(0.25)
                    live.update(self._table())
        else:
            while True:
                await asyncio.sleep(10)
                p = self.progress
                log.info("annotate: %d/%d episodes (%d failed)", p.done + p.failed, p.total, p.failed)

    async def __aenter__(self) -> ProgressDisplay:
        self._task = asyncio.create_task(self._loop())
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self.enabled:
            self.console.print(self._table())
