"""Tables for evaluation reports (rich renderables; the CLI prints them), and a running evaluation's progress."""

from __future__ import annotations

import time
from typing import Any

from rich.table import Table

from steerable.progress import ProgressLine, format_eta
from steerable.runtime.evaluation import EpisodeResult, EvalReport

__all__ = ["EvalProgress", "eval_table"]


class EvalProgress(ProgressLine):
    """`eval: episodes 3/50, 2 succeeded, ... ETA 94 s` on stderr; `on_result` and `on_time` are
    `evaluate`'s callbacks. While episodes run, the line shows how far each is in simulated seconds
    (`episodes 1/4 (running: 12 s, 14 s of 30 s), ...`), and the ETA counts a running episode as that
    share of `max_seconds` done: a long episode moves the line before it ends."""

    def __init__(self, total: int, *, max_seconds: float | None = None, **options: Any) -> None:
        super().__init__("eval", total, **options)
        self.successes = 0
        self.max_seconds = max_seconds
        self._running: dict[int, float] = {}  # seed -> simulated seconds so far

    def __enter__(self) -> EvalProgress:
        super().__enter__()
        return self

    def on_time(self, seed: int, sim_seconds: float) -> None:
        with self._lock:
            self._running[seed] = sim_seconds

    def on_result(self, result: EpisodeResult) -> None:
        with self._lock:
            self._running.pop(result.seed, None)
        self.advance()  # before the success: a line never shows more successes than episodes
        self.successes += int(result.success)

    def text(self) -> str:
        successes = self.successes
        with self._lock:
            done, running = self.done, sorted(self._running.values())
        elapsed = max(time.monotonic() - self.started_at, 1e-6)
        where = ""
        progress = float(done)
        if running:
            of = f" of {self.max_seconds:g} s" if self.max_seconds else ""
            shown = ", ".join(f"{s:.0f} s" for s in running[:4]) + (", ..." if len(running) > 4 else "")
            where = f" (running: {shown}{of})"
            if self.max_seconds:
                progress += sum(min(s / self.max_seconds, 1.0) for s in running)
        left = self.total - progress
        eta = left * elapsed / progress if progress > 0 and left > 0 and done < self.total else None
        return (f"eval: episodes {done}/{self.total}{where}, {successes} succeeded, {done / elapsed:.2f} episodes/s, "
                f"{elapsed:.0f} s elapsed, ETA {format_eta(eta)}")


def eval_table(report: EvalReport) -> Table:
    """Success overall, per task kind, with/without interjection and, when unseen phrasings ran, per
    phrasing (seen and unseen side by side, and the drop between them)."""
    n = len(report.episodes)
    seeds = len({e.seed for e in report.episodes})  # with "both", each seed ran twice
    title = (f"steerable run --eval_episodes {seeds}{_worded(report)}: "
             f"high level {_named(report.high_level, 'planner')} · "
             f"low level {_named(report.low_level, 'controller')} · "
             f"{f'{report.difficulty} tasks' if report.difficulty else f'--env {report.env}'} "
             f"({report.wall_seconds:.1f} s)")
    table = Table(title=title, title_justify="left")
    for column in ("group", "episodes", "successes", "success rate"):
        table.add_column(column, justify="left" if column == "group" else "right")
    ok = sum(e.success for e in report.episodes)
    table.add_row("overall", str(n), str(ok), f"{ok / max(n, 1):.1%}")
    groups = report.groups()
    for kind, (s, m) in groups["kind"].items():
        table.add_row(f"kind: {kind}", str(m), str(s), f"{s / m:.1%}")
    for key, (s, m) in groups["interjection"].items():
        table.add_row(f"{key} interjection", str(m), str(s), f"{s / m:.1%}")
    shares = groups["phrasing"]
    if "unseen" in shares:
        for key, (s, m) in shares.items():
            table.add_row(f"{key} phrasings", str(m), str(s), f"{s / m:.1%}")
    if set(shares) == {"seen", "unseen"}:
        (s0, m0), (s1, m1) = shares["seen"], shares["unseen"]
        table.add_row("unseen - seen", "", "", f"{100 * (s1 / m1 - s0 / m0):+.1f} points")
    return table


def _worded(report: EvalReport) -> str:
    """How the episodes were worded, when not as the training data (`--eval_phrasings`)."""
    return {"unseen": " (unseen phrasings)", "both": " (each seed seen and unseen)"}.get(report.phrasings, "")


def _named(level: str, role: str) -> str:
    """The simulator's scripted models are test doubles, and every output says so."""
    return f"scripted {role} (test double)" if level == "scripted" else level
