"""Tables for evaluation reports (rich renderables; the CLI prints them), and a running evaluation's progress."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from steerable.progress import ProgressLine
from steerable.runtime.evaluation import EpisodeResult, EvalReport

__all__ = ["EvalProgress", "eval_table"]


class EvalProgress(ProgressLine):
    """`eval: episodes 3/50, 2 succeeded, ... ETA 94 s` on stderr; `on_result` is `evaluate`'s callback."""

    def __init__(self, total: int, **options: Any) -> None:
        super().__init__("eval", total, **options)
        self.successes = 0

    def __enter__(self) -> EvalProgress:
        super().__enter__()
        return self

    def on_result(self, result: EpisodeResult) -> None:
        self.advance()  # before the success: a line never shows more successes than episodes
        self.successes += int(result.success)

    def text(self) -> str:
        successes = self.successes
        head, _, tail = super().text().partition(", ")
        return f"{head}, {successes} succeeded, {tail}"


def eval_table(report: EvalReport) -> Table:
    """Success overall, per task kind and with/without interjection."""
    n = len(report.episodes)
    title = (f"steerable run --eval_episodes {n}: high level {_named(report.high_level, 'planner')} · "
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
    return table


def _named(level: str, role: str) -> str:
    """The simulator's scripted models are test doubles, and every output says so."""
    return f"scripted {role} (test double)" if level == "scripted" else level
