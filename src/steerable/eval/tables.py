"""Rich tables for an evaluation and for a comparison (what `steerable eval` and the demo print)."""

from __future__ import annotations

import math

from rich.table import Table

from steerable.eval.runs import Comparison, Evaluation
from steerable.eval.scoring import METRICS

__all__ = ["comparison_table", "evaluation_table", "format_episode_list"]


def _fmt(x: float | None, digits: int = 3) -> str:
    return "-" if x is None or math.isnan(x) or math.isinf(x) else f"{x:.{digits}f}"


def evaluation_table(ev: Evaluation) -> Table:
    r = ev.report
    table = Table(title=f"{len(r.episodes)} episodes vs {ev.gold.kind.replace('_', ' ')}", title_justify="left")
    table.add_column("metric", no_wrap=True)
    table.add_column("value", justify="right")
    table.add_column("95% CI", justify="right")
    for m in METRICS:
        lo, hi = r.ci95.get(m.key, (math.nan, math.nan))
        title = m.title.replace("±tol", f"±{r.boundary_tolerance_s:g} s")
        table.add_row(title, _fmt(r.metrics[m.key]), f"{_fmt(lo)}..{_fmt(hi)}")
    if ev.events is not None:
        e = ev.events
        table.add_row(f"gripper events F1 (±{e['tolerance_s']:g} s)", _fmt(e["f1"]), "")
    return table


def comparison_table(cmp: Comparison) -> Table:
    rep = cmp.report
    table = Table(title=f"B - A on {len(rep.episodes)} shared episodes (paired bootstrap, {rep.resamples} resamples)",
                  title_justify="left")
    table.add_column("metric", no_wrap=True)
    for name in ("A", "B", "B - A", "95% CI", "P(B better)"):
        table.add_column(name, justify="right", no_wrap=True)
    tolerance = f"±{rep.a.boundary_tolerance_s:g} s"
    for m in METRICS:
        lo, hi = rep.diff_ci95[m.key]
        d = rep.diff[m.key]
        sign = "" if math.isnan(d) else ("+" if d >= 0 else "")
        table.add_row(
            m.title.replace("±tol", tolerance), _fmt(rep.a.metrics[m.key]), _fmt(rep.b.metrics[m.key]),
            f"{sign}{_fmt(d)}",
            f"{_fmt(lo)}..{_fmt(hi)}", _fmt(rep.p_b_better[m.key], 2),
        )
    return table


def format_episode_list(episodes: list[int], limit: int = 8) -> str:
    shown = ", ".join(str(e) for e in episodes[:limit])
    return shown + (f", ... ({len(episodes)} in all)" if len(episodes) > limit else "")
