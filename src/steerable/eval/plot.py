"""One PNG per evaluation: gold vs predicted timelines for a few episodes, and metric bars with 95 % CIs.

A predicted segment matched to a gold one at IoU >= 0.5 is green when the labels agree, yellow when
they differ, red when unmatched; gold segments alternate two blues. Needs matplotlib (the `plot` extra); drawn
with the Agg backend (no display).
"""

from __future__ import annotations

import io
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from steerable.dataset.atomic import atomic_write_bytes
from steerable.errors import MissingExtraError, WriteError, explain_os_error, os_cause
from steerable.eval.gold import EpisodeSegments, Segment
from steerable.eval.metrics import segment_matches
from steerable.eval.report import EvalReport
from steerable.eval.scoring import METRICS

__all__ = ["plot_report"]

_BAR_METRICS = [m for m in METRICS if m.key not in ("boundary_error_s", "over_segmentation")]
_GOLD = ("#4c72b0", "#8fb0de")
_HIT, _WRONG_LABEL, _MISS = "#55a868", "#d1a430", "#c44e52"
_RUN_COLORS = ("#4c72b0", "#dd8452")


def plot_report(
    path: Path,
    gold: EpisodeSegments,
    runs: Sequence[tuple[str, EpisodeSegments, EvalReport]],
    *,
    same: Callable[[str, str], bool] | None = None,
    episodes: int = 4,
    title: str = "",
) -> Path:
    """Write the figure for one run, or for several runs on the same gold (a comparison)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise MissingExtraError("matplotlib", "plot") from exc
    shown = runs[0][2].episodes[:episodes]
    lanes = 1 + len(runs)
    fig = plt.figure(figsize=(11, 1.0 + 0.55 * lanes * len(shown) + 3.6))
    grid = fig.add_gridspec(len(shown) + 1, 1, height_ratios=[0.55 * lanes] * len(shown) + [3.2], hspace=0.6, top=0.93)
    for row, episode in enumerate(shown):
        ax = fig.add_subplot(grid[row])
        lanes_data: list[tuple[str, list[Segment], list[Segment] | None]] = [("gold", gold[episode], None)]
        lanes_data += [(name, pred[episode], gold[episode]) for name, pred, _ in runs]
        _timeline(ax, episode, lanes_data, same or (lambda a, b: a == b))
    _bars(fig.add_subplot(grid[-1]), runs)
    key = "predicted: green = matched at IoU >= 0.5 with the label, yellow = matched, other label, red = unmatched"
    fig.suptitle(f"{title}\n{key}" if title else key, fontsize=9)
    path = Path(path)
    png = io.BytesIO()
    fig.savefig(png, format=path.suffix[1:].lower() or "png", dpi=90, bbox_inches="tight")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(path, png.getvalue(), durable=False)  # never a truncated PNG
    except OSError as exc:
        reason = explain_os_error(os_cause(exc) or exc, paths=False)
        raise WriteError(f"could not write the plot {path}: {reason}") from exc
    finally:
        plt.close(fig)
    return path


def _timeline(
    ax: Any, episode: int, lanes: Sequence[tuple[str, list[Segment], list[Segment] | None]],
    same: Callable[[str, str], bool],
) -> None:
    end = max((s.end for _, segs, _ in lanes for s in segs), default=1.0)
    for lane, (_name, segs, against) in enumerate(lanes):
        y = len(lanes) - 1 - lane
        colors = [_GOLD[k % 2] for k in range(len(segs))]
        if against is not None:
            colors = [_MISS] * len(segs)
            spans = [(s.start, s.end) for s in segs]
            for i, j, _ in segment_matches(spans, [(g.start, g.end) for g in against], 0.5):
                colors[i] = _HIT if same(segs[i].label, against[j].label) else _WRONG_LABEL
        for s, color in zip(segs, colors, strict=True):
            ax.broken_barh([(s.start, s.end - s.start)], (y + 0.1, 0.8), facecolors=color, edgecolors="white")
            if (s.end - s.start) / end > 0.08:
                ax.text((s.start + s.end) / 2, y + 0.5, _short(s.label, (s.end - s.start) / end), ha="center",
                        va="center", fontsize=7, color="white", clip_on=True)
    ax.set_xlim(0, end)
    ax.set_ylim(0, len(lanes))
    ax.set_yticks([len(lanes) - 0.5 - i for i in range(len(lanes))], [name for name, _, _ in lanes], fontsize=8)
    ax.set_ylabel(f"ep {episode}", fontsize=8, rotation=0, ha="right", va="center")
    ax.tick_params(axis="x", labelsize=7)
    ax.set_xlabel("seconds", fontsize=7, labelpad=1)


def _short(label: str, share: float) -> str:
    room = max(6, int(share * 140))
    return label if len(label) <= room else label[: room - 1] + "…"


def _bars(ax: Any, runs: Sequence[tuple[str, EpisodeSegments, EvalReport]]) -> None:
    width = 0.8 / len(runs)
    for r, (name, _, report) in enumerate(runs):
        xs = [i + (r - (len(runs) - 1) / 2) * width for i in range(len(_BAR_METRICS))]
        values = [_finite(report.metrics[m.key]) for m in _BAR_METRICS]
        lows, highs = [], []
        for m, v in zip(_BAR_METRICS, values, strict=True):
            lo, hi = report.ci95.get(m.key, (v, v))
            lows.append(max(0.0, v - _finite(lo, v)))
            highs.append(max(0.0, _finite(hi, v) - v))
        extra = report.metrics
        label = (f"{name}: boundary error {extra['boundary_error_s']:.2f} s, "
                 f"over-segmentation {extra['over_segmentation']:.2f}, {len(report.episodes)} episodes")
        ax.bar(xs, values, width, yerr=[lows, highs], capsize=2, color=_RUN_COLORS[r % 2], label=label)
    tolerance = f"±{runs[0][2].boundary_tolerance_s:g} s"
    titles = [m.title.replace(" @", "\n@").replace("±tol", tolerance) for m in _BAR_METRICS]
    ax.set_xticks(range(len(_BAR_METRICS)), titles,
                  fontsize=7, rotation=30, ha="right")
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("score (95 % CI)", fontsize=8)
    ax.legend(fontsize=7, loc="upper right", framealpha=0.9)
    ax.grid(axis="y", alpha=0.3)


def _finite(x: float, default: float = 0.0) -> float:
    return default if math.isnan(x) or math.isinf(x) else x
