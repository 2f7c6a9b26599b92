"""Subtask span algebra: reading a segment reply, windows and their merge, the final gap-free cover.

A span is a subtask label and its start; it ends where the next one starts (the last one at the
episode end), so a list of spans is a gap-free cover of the episode by construction.
"""

from __future__ import annotations

import bisect
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from steerable.annotate.modules.plan.prompting import SegmentReply

__all__ = [
    "Span",
    "SpanReport",
    "clean_label",
    "finalize_spans",
    "label_key",
    "merge_windows",
    "plan_windows",
    "read_segment_reply",
]

_QUOTES = "\"'`“”‘’"
_ARTICLES = {"a", "an", "the"}


@dataclass(frozen=True)
class Span:
    """One subtask: its label and its start time (a sampled or stored frame timestamp)."""

    start: float
    text: str


@dataclass
class SpanReport:
    """What cleaning changed, for the run summary."""

    dropped: int = 0  # items without a usable label or start
    clipped: int = 0  # starts outside the frames shown, moved to the nearest shown frame
    joined: int = 0  # adjacent spans with the same label made one
    unplaceable: int = 0  # spans with no free frame left after the previous ones
    short_merged: int = 0  # spans shorter than the minimum merged into a neighbour
    excess_merged: int = 0  # spans beyond the step limit merged into a neighbour

    def notes(self) -> list[str]:
        what = {
            "dropped": "subtask item(s) without a label or a numeric start dropped",
            "clipped": "start time(s) outside the frames shown clipped to them",
            "joined": "adjacent subtask(s) with the same label joined",
            "unplaceable": "subtask(s) dropped: no frame left after the previous start",
            "short_merged": "subtask(s) shorter than min_subtask_seconds merged into a neighbour",
            "excess_merged": "subtask(s) beyond plan_max_steps merged into a neighbour",
        }
        return [f"{getattr(self, key)} {text}" for key, text in what.items() if getattr(self, key)]


def clean_label(value: Any) -> str:
    """A label as one line: whitespace collapsed, wrapping quotes and a final period removed."""
    if not isinstance(value, str):
        return ""
    text = " ".join(value.split()).strip(_QUOTES + " ")
    return text.rstrip(".").strip()


def label_key(text: str) -> str:
    """Comparison key for labels: case, punctuation and articles ignored."""
    words = re.sub(r"[^\w\s]", " ", text.lower()).split()
    return " ".join(w for w in words if w not in _ARTICLES)


def plan_windows(times: Sequence[float], max_frames: int, overlap: int) -> list[list[float]]:
    """Split sampled frame times into the fewest overlapping windows of at most `max_frames`.

    Windows are equally long and evenly placed, so consecutive windows share at least `overlap`
    frames and none is a short tail (each holds more than half of `max_frames`).
    """
    total = len(times)
    if total <= max_frames:
        return [list(times)]
    overlap = max(0, min(overlap, (max_frames - 1) // 2))
    count = math.ceil((total - overlap) / (max_frames - overlap))
    size = math.ceil((total + (count - 1) * overlap) / count)
    starts = [round(k * (total - size) / (count - 1)) for k in range(count)]
    return [list(times[s : s + size]) for s in starts]


def _nearest(sorted_times: Sequence[float], t: float) -> float:
    i = bisect.bisect_left(sorted_times, t)
    if i == 0:
        return sorted_times[0]
    if i == len(sorted_times):
        return sorted_times[-1]
    before, after = sorted_times[i - 1], sorted_times[i]
    return before if t - before <= after - t else after


def read_segment_reply(reply: SegmentReply, shown: Sequence[float], report: SpanReport) -> list[Span]:
    """Spans from a segment reply, each start on a frame that was shown."""
    spans: list[Span] = []
    step = (shown[-1] - shown[0]) / max(1, len(shown) - 1)
    for item in reply.subtasks:
        text = clean_label(item.text)
        start = item.start
        if not text or not math.isfinite(start):
            report.dropped += 1
            continue
        if start < shown[0] - step / 2 or start > shown[-1] + step / 2:
            report.clipped += 1
        spans.append(Span(_nearest(shown, start), text))
    return sorted(spans, key=lambda s: s.start)


def _join_equal(spans: list[Span], report: SpanReport) -> list[Span]:
    out: list[Span] = []
    for span in spans:
        if out and label_key(out[-1].text) == label_key(span.text):
            report.joined += 1
            continue
        out.append(span)
    return out


def merge_windows(
    per_window: Sequence[Sequence[Span]], windows: Sequence[Sequence[float]], report: SpanReport
) -> list[Span]:
    """One span list from overlapping windows, each window trusted up to the middle of its overlap.

    At each cut the later window's span in progress is kept (it may have started before the cut),
    so an action cut by a window edge joins with the earlier window's span when their labels agree.
    """
    merged = sorted(per_window[0], key=lambda s: s.start)
    for k in range(1, len(windows)):
        shared = [t for t in windows[k] if t <= windows[k - 1][-1]]
        cut = shared[len(shared) // 2] if shared else windows[k][0]
        kept = [s for s in merged if s.start < cut]
        incoming = sorted(per_window[k], key=lambda s: s.start)
        before = [s for s in incoming if s.start < cut]
        after = [s for s in incoming if s.start >= cut]
        if before:
            active = before[-1]
            last = kept[-1].start if kept else -math.inf
            after.insert(0, active if active.start > last else replace(active, start=cut))
        merged = kept + after
    return _join_equal(merged, report)


def _durations(spans: Sequence[Span], end: float) -> list[float]:
    bounds = [s.start for s in spans] + [end]
    return [b - a for a, b in zip(bounds, bounds[1:], strict=False)]


def _absorb(spans: list[Span], i: int, end: float) -> list[Span]:
    """Remove span i, letting its shorter neighbour cover its time (ties go to the earlier one)."""
    durations = _durations(spans, end)
    into_next = i == 0 or (i < len(spans) - 1 and durations[i + 1] < durations[i - 1])
    out = list(spans)
    if into_next:
        out[i + 1] = replace(out[i + 1], start=out[i].start)
    del out[i]
    return out


def finalize_spans(
    spans: Sequence[Span],
    frame_times: np.ndarray,
    *,
    end: float,
    min_seconds: float,
    max_steps: int,
    report: SpanReport,
) -> list[Span]:
    """The final cover: first span at the first frame, one distinct stored frame per start, no span
    shorter than `min_seconds` (unless it is the only one), at most `max_steps` spans."""
    ordered = sorted(spans, key=lambda s: s.start)
    if not ordered or len(frame_times) == 0:
        return []
    placed: list[Span] = []
    previous = -1
    for i, span in enumerate(ordered):
        index = 0 if i == 0 else int(np.argmin(np.abs(frame_times - span.start)))
        index = max(index, previous + 1)  # a taken frame moves the start to the next later frame
        if index >= len(frame_times):
            report.unplaceable += 1
            continue
        placed.append(Span(float(frame_times[index]), span.text))
        previous = index
    placed = _join_equal(placed, report)
    while len(placed) > 1:
        durations = _durations(placed, end)
        shortest = int(np.argmin(durations))
        if durations[shortest] >= min_seconds:
            break
        placed = _join_equal(_absorb(placed, shortest, end), report)
        report.short_merged += 1
    while len(placed) > max_steps:
        placed = _join_equal(_absorb(placed, int(np.argmin(_durations(placed, end))), end), report)
        report.excess_merged += 1
    return placed
