"""Tables for evaluation reports (rich renderables; the CLI prints them)."""

from __future__ import annotations

from rich.table import Table

from steerable.runtime.evaluation import EvalReport

__all__ = ["eval_table"]


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
