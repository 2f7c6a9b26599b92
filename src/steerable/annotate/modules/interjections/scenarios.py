"""Where interjections go and which Hi Robot scenario each one plays: deterministic per (seed, episode).

Interjections sit on boundaries between subtasks when the plan module labelled them, so the person
speaks just as the next subtask begins; the scenario decides how the words relate to that subtask.
Without subtask rows the boundaries are motion keystates (gripper events, pauses), else even splits.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from steerable.annotate.modules.interjections.config import InterjectionsConfig, Scenario

__all__ = [
    "Boundary",
    "PlannedInterjection",
    "choose_interjections",
    "keystate_boundaries",
    "subtask_boundaries",
    "subtask_starts",
    "window_times",
]


@dataclass(frozen=True)
class Boundary:
    """A moment a person may speak: a stored frame time and, when labelled, the subtasks around it."""

    time: float
    done: tuple[str, ...] = ()  # subtasks finished before `time`, oldest first
    remaining: tuple[str, ...] = ()  # the subtask starting at `time`, then the later ones

    @property
    def next_step(self) -> str | None:
        return self.remaining[0] if self.remaining else None


@dataclass(frozen=True)
class PlannedInterjection:
    boundary: Boundary
    scenario: Scenario


def subtask_starts(rows: Iterable[Mapping[str, Any]]) -> list[tuple[float, str]]:
    """(start, text) of the staged subtask rows, in time order."""
    spans = [
        (float(r["timestamp"]), str(r.get("content") or "").strip())
        for r in rows
        if r.get("style") == "subtask" and r.get("timestamp") is not None
    ]
    return sorted(spans)


def subtask_boundaries(spans: Sequence[tuple[float, str]], min_t: float) -> list[Boundary]:
    """Every subtask start after the first one, no earlier than `min_t`, with its context."""
    texts = tuple(text for _, text in spans)
    return [
        Boundary(start, done=texts[:i], remaining=texts[i:])
        for i, (start, text) in enumerate(spans)
        if i >= 1 and text and start >= min_t
    ]


def keystate_boundaries(
    keystates: Sequence[Mapping[str, Any]] | None,
    timestamps: np.ndarray,
    frame_time: Callable[[float], float],
    config: InterjectionsConfig,
) -> list[Boundary]:
    """Unlabelled boundaries: motion keystates, or `max + 1` even splits of the episode without them."""
    if len(timestamps) < 2:
        return []
    first, last = float(timestamps[0]), float(timestamps[-1])
    wanted = [float(k["time"]) for k in keystates or () if "time" in k]
    if not wanted:
        parts = config.max_interjections_per_episode + 1
        wanted = [first + (last - first) * j / parts for j in range(1, parts)]
    # Something must still happen after the person speaks, so the last frame never qualifies.
    times = sorted({frame_time(t) for t in wanted})
    return [Boundary(t) for t in times if t >= config.interjection_min_t and first < t < last]


def choose_interjections(
    candidates: Sequence[Boundary], config: InterjectionsConfig, rng: np.random.Generator
) -> list[PlannedInterjection]:
    """Pick up to `max_interjections_per_episode` boundaries and give each a scenario.

    Scenarios follow a random rotation of the configured kinds, so an episode never repeats a kind
    before it has used all of them and, over episodes, every kind shows up about equally often.
    """
    count = min(config.max_interjections_per_episode, len(candidates))
    if count == 0:
        return []
    picked = sorted(int(i) for i in rng.choice(len(candidates), size=count, replace=False))
    order = [config.scenarios[int(i)] for i in rng.permutation(len(config.scenarios))]
    return [PlannedInterjection(candidates[i], order[k % len(order)]) for k, i in enumerate(picked)]


def window_times(
    t: float, timestamps: np.ndarray, frame_time: Callable[[float], float], config: InterjectionsConfig
) -> list[float]:
    """Stored frame times evenly spanning the visual window centred on `t` (clamped, deduplicated)."""
    n = config.interjection_window_frames
    half = config.interjection_window_seconds / 2
    first, last = float(timestamps[0]), float(timestamps[-1])
    wanted = np.linspace(t - half, t + half, n) if n > 1 else np.array([t])
    times: list[float] = []
    for w in wanted:
        snapped = frame_time(float(np.clip(w, first, last)))
        if snapped not in times:
            times.append(snapped)
    return times
