"""The progress of an annotation run: a live table on a terminal, a line every N seconds otherwise.

Without a terminal (CI, `nohup`, a Ray worker) the same counters go to stderr as one plain line
every `every_s` seconds (episodes done/failed, calls/s, ETA), so a log shows the run is alive.
Both say when a VLM server has left the requests waiting on it unanswered for `QUIET_AFTER_S` or
more ("no reply from http://... for 120 s"), so a stuck server is not mistaken for a slow run.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TextIO

from steerable.annotate.engine import Progress
from steerable.progress import eta_seconds, format_eta

if TYPE_CHECKING:
    from rich.console import RenderableType

    from steerable.vlm.protocol import VLMStats

__all__ = ["QUIET_AFTER_S", "ProgressDisplay", "Snapshot", "StatsSource", "vlm_counters"]

QUIET_AFTER_S = 30.0  # a healthy server answers some request every few seconds, even under load


class StatsSource(Protocol):
    """Whatever holds the run's VLM counters: a client, or an executor session (None: no model)."""

    @property
    def stats(self) -> VLMStats | None: ...


def vlm_counters(vlm: StatsSource | None) -> dict[str, float]:
    """The client's numeric counters (empty when there is no model)."""
    stats = None if vlm is None else vlm.stats
    if stats is None:
        return {}
    return {k: v for k, v in stats.snapshot().items() if isinstance(v, int | float)}


@dataclass(frozen=True)
class Snapshot:
    """What both displays show, computed once per refresh."""

    finished: int
    total: int
    done: int
    failed: int
    resumed: int
    running: int
    eta_s: float | None
    calls: int | None  # None without a model
    in_flight: int
    calls_per_s: float
    tokens_per_s: float
    retries: int
    no_reply: tuple[tuple[str, float], ...] = ()  # (server URL, seconds) silent for QUIET_AFTER_S or more

    @classmethod
    def of(cls, p: Progress, vlm: StatsSource | None) -> Snapshot:
        elapsed = max(time.monotonic() - p.started_at, 1e-6)
        finished = p.done + p.failed
        c = vlm_counters(vlm)
        calls = int(c.get("calls", 0))
        stats = None if vlm is None else vlm.stats
        silent = {} if stats is None else stats.no_reply()
        return cls(
            finished=finished,
            total=p.total,
            done=p.done,
            failed=p.failed,
            resumed=p.resumed,
            running=p.running,
            # at the rate of the episodes worked on: resumed ones cost nothing
            eta_s=eta_seconds(finished - p.resumed, p.total - p.resumed, elapsed),
            calls=calls if vlm is not None and vlm.stats is not None else None,
            in_flight=int(c.get("in_flight", 0)),
            calls_per_s=calls / elapsed,
            tokens_per_s=(c.get("completion_tokens", 0) + c.get("prompt_tokens", 0)) / elapsed,
            retries=int(c.get("retries", 0)),
            no_reply=tuple(sorted((url, s) for url, s in silent.items() if s >= QUIET_AFTER_S)),
        )

    @property
    def eta(self) -> str:
        return format_eta(self.eta_s)

    @property
    def stalls(self) -> list[str]:
        """`no reply from URL for N s`, one per server that has kept requests waiting that long."""
        return [f"no reply from {url} for {seconds:.0f} s" for url, seconds in self.no_reply]

    def line(self) -> str:
        """One plain log line."""
        text = (
            f"annotate: episodes {self.finished}/{self.total} (done {self.done}, failed {self.failed}, "
            f"resumed {self.resumed}, running {self.running})"
        )
        if self.calls is not None:
            text += f", VLM calls {self.calls} ({self.calls_per_s:.1f} calls/s, {self.in_flight} in flight)"
        return "; ".join([text + f", ETA {self.eta}", *self.stalls])


class ProgressDisplay:
    """A table refreshed a few times a second on a terminal; a line every `every_s` seconds otherwise."""

    def __init__(
        self,
        progress: Progress,
        vlm: StatsSource | None,
        *,
        enabled: bool = True,
        every_s: float = 30.0,
        stream: TextIO | None = None,
    ) -> None:
        self.progress = progress
        self.vlm = vlm
        self.stream = stream or sys.stderr
        self.live = enabled and self.stream.isatty()
        self.lines = enabled and not self.live
        self.every_s = every_s
        self._task: asyncio.Task[None] | None = None

    def snapshot(self) -> Snapshot:
        return Snapshot.of(self.progress, self.vlm)

    def _table(self) -> RenderableType:
        from rich.console import Group
        from rich.table import Table
        from rich.text import Text

        s = self.snapshot()
        table = Table.grid(padding=(0, 2))
        table.add_row(
            f"episodes {s.finished}/{s.total}",
            f"done {s.done}",
            f"failed {s.failed}",
            f"resumed {s.resumed}",
            f"running {s.running}",
            f"ETA {s.eta}",
        )
        if s.calls is not None:
            table.add_row(
                f"VLM calls {s.calls}",
                f"in flight {s.in_flight}",
                f"{s.calls_per_s:.1f} calls/s",
                f"{s.tokens_per_s:.0f} tok/s",
                f"retries {s.retries}",
                "",
            )
        if not s.stalls:
            return table
        return Group(table, *(Text(stall, style="bold") for stall in s.stalls))  # below: not one wide column

    def _print_line(self) -> None:
        print(self.snapshot().line(), file=self.stream, flush=True)

    async def _loop(self) -> None:
        if self.live:
            from rich.console import Console
            from rich.live import Live

            console = Console(file=self.stream)
            with Live(self._table(), console=console, refresh_per_second=4, transient=False) as live:
                while True:
                    await asyncio.sleep(0.25)
                    live.update(self._table())
        elif self.lines:
            while True:
                await asyncio.sleep(self.every_s)
                self._print_line()

    async def __aenter__(self) -> ProgressDisplay:
        self._task = asyncio.create_task(self._loop())
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self.live:
            from rich.console import Console

            Console(file=self.stream).print(self._table())
        elif self.lines and self.progress.total:
            self._print_line()  # the final count, so a log always ends with one
