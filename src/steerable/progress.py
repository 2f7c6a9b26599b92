"""The progress of a long job counted in items: a live line on a terminal, a plain line every N seconds otherwise.

The house style of `steerable annotate`'s display (`annotate/progress.py`), for jobs that run in
plain threads rather than an event loop (`steerable view --export`): on a terminal one line
rewritten a few times a second; without one (CI, `nohup`, a pipe) the same line on stderr every
`every_s` seconds and once at the end, so a log shows the job is alive and when it should end.
"""

from __future__ import annotations

import sys
import threading
import time
from types import TracebackType
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from rich.live import Live

__all__ = ["ProgressLine", "eta_seconds", "format_eta"]


def eta_seconds(finished: int, total: int, elapsed_s: float) -> float | None:
    """Seconds left at the rate so far; None before the first item or once all are done."""
    remaining = total - finished
    if finished <= 0 or remaining <= 0 or elapsed_s <= 0:
        return None
    return remaining * elapsed_s / finished


def format_eta(eta_s: float | None) -> str:
    """`12 s`, or `-` when there is no estimate."""
    return f"{eta_s:.0f} s" if eta_s is not None else "-"


class ProgressLine:
    """`label: unit done/total, rate, elapsed, ETA` — live on a terminal, every `every_s` seconds otherwise.

    `advance()` may be called from any thread. Use it as a context manager; leaving the block prints
    the final count (also when the job failed part way, so a log ends with how far it got; a job that
    fails before its first item, e.g. on a bad argument, leaves only its error).
    """

    def __init__(
        self,
        label: str,
        total: int,
        *,
        unit: str = "episodes",
        stream: TextIO | None = None,
        every_s: float = 30.0,
        enabled: bool = True,
    ) -> None:
        self.label, self.total, self.unit = label, total, unit
        self.stream = stream or sys.stderr
        self.live = enabled and self.stream.isatty()
        self.lines = enabled and not self.live
        self.every_s = every_s
        self.done = 0
        self.started_at = time.monotonic()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._live: Live | None = None

    def advance(self, n: int = 1) -> None:
        with self._lock:
            self.done += n

    def text(self) -> str:
        """The one line both modes show."""
        with self._lock:
            done = self.done
        elapsed = max(time.monotonic() - self.started_at, 1e-6)
        return (
            f"{self.label}: {self.unit} {done}/{self.total}, {done / elapsed:.2f} {self.unit}/s, "
            f"{elapsed:.0f} s elapsed, ETA {format_eta(eta_seconds(done, self.total, elapsed))}"
        )

    def _print_lines(self) -> None:
        while not self._stop.wait(self.every_s):
            print(self.text(), file=self.stream, flush=True)

    def __enter__(self) -> ProgressLine:
        self.started_at = time.monotonic()
        if self.live:
            from rich.console import Console
            from rich.live import Live
            from rich.text import Text

            self._live = Live(
                get_renderable=lambda: Text(self.text()),
                console=Console(file=self.stream),
                refresh_per_second=4,
                transient=False,
            )
            self._live.start()
        elif self.lines:
            self._thread = threading.Thread(target=self._print_lines, name="steerable-progress", daemon=True)
            self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        started = exc is None or self.done > 0
        if self._live is not None:
            self._live.transient = not started
            self._live.stop()  # draws the final line and leaves it on screen (or erases it)
        if self._thread is not None:
            self._thread.join()
        if self.lines and self.total and started:
            print(self.text(), file=self.stream, flush=True)
