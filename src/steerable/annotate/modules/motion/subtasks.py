"""Heuristic subtask rows from keystates, for runs without a vision-language model.

Gripper events give the skeleton of a manipulation: an opening before the first grasp prepares
it, a close that is later released is a grasp, an opening while holding is a release, and a close
after the last release (a gripper going back to rest) is part of the retreat. The arm's first stop
after a grasp or release (the end of the lift) closes that phase. The text is templated, so the
caller labels these rows as heuristic in its summary.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from steerable.annotate.modules.motion.config import Granularity
from steerable.annotate.modules.motion.keystates import Keystate

__all__ = ["FINE_TEXTS", "Granularity", "heuristic_subtasks"]

FINE_TEXTS = {
    "reach": "reach for the object",
    "grasp": "grasp the object",
    "move": "move it to the target",
    "release": "release it",
    "retreat": "retreat",
}
PICK = "pick up the object"
PLACE = "place it at the target"

Pair = tuple[Keystate, "Keystate | None"]


def heuristic_subtasks(
    timestamps: np.ndarray,
    keystates: Sequence[Keystate],
    task: str,
    *,
    granularity: Granularity = "fine",
    min_pause_s: float = 0.3,
) -> list[dict[str, Any]]:
    """Subtask rows covering the episode from its first frame, on stored frame timestamps.

    With grasp/release pairs: "fine" gives reach, grasp, move, release, retreat; "coarse" gives
    pick / place. Without gripper events the episode is cut at pauses of at least `min_pause_s`
    into "<task> (part k of n)", or is one row with the task when the arm never pauses.
    """
    ts = np.asarray(timestamps)
    if len(ts) == 0:
        return []
    ordered = sorted(keystates, key=lambda k: k.frame_index)
    pauses = [k for k in ordered if k.kind == "pause"]
    pairs = _grasp_release([k for k in ordered if k.kind != "pause"])
    if pairs:
        starts = _manipulation(pairs, pauses, len(ts), granularity)
    else:
        starts = _by_pauses(pauses, ts, task, min_pause_s)
    return [_row(float(ts[i]), text) for i, text in _clean(starts, len(ts))]


def _row(timestamp: float, text: str) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": text,
        "style": "subtask",
        "timestamp": timestamp,
        "camera": None,
        "tool_calls": None,
    }


def _grasp_release(grips: list[Keystate]) -> list[Pair]:
    """(grasp, release or None) pairs in order; preparatory openings and resting closes are skipped."""
    pairs: list[Pair] = []
    held: Keystate | None = None
    released = False
    for i, k in enumerate(grips):
        if k.kind == "gripper_close" and held is None:
            opens_later = any(g.kind == "gripper_open" for g in grips[i + 1 :])
            if opens_later or not released:
                held = k
        elif k.kind == "gripper_open" and held is not None:
            pairs.append((held, k))
            held, released = None, True
    if held is not None:
        pairs.append((held, None))
    return pairs


def _settle(event: Keystate, pauses: list[Keystate], limit: int) -> int:
    """Frame where the arm first stops after `event` (before `limit`), else just after the swing."""
    stop = next((p.frame_index for p in pauses if event.end_index < p.frame_index < limit), None)
    return stop if stop is not None else event.end_index + 1


def _manipulation(
    pairs: list[Pair], pauses: list[Keystate], n: int, granularity: Granularity
) -> list[tuple[int, str]]:
    fine = granularity == "fine"
    starts = [(0, FINE_TEXTS["reach"] if fine else PICK)]
    for i, (grasp, release) in enumerate(pairs):
        more = i + 1 < len(pairs)
        next_grasp = pairs[i + 1][0].start_index if more else n
        release_onset = release.start_index if release is not None else n
        if fine:
            starts.append((grasp.start_index, FINE_TEXTS["grasp"]))
        starts.append((_settle(grasp, pauses, release_onset), FINE_TEXTS["move"] if fine else PLACE))
        if release is None:
            continue
        if fine:
            starts.append((release.start_index, FINE_TEXTS["release"]))
            after = FINE_TEXTS["reach"] if more else FINE_TEXTS["retreat"]
            starts.append((_settle(release, pauses, next_grasp), after))
        elif more:
            starts.append((_settle(release, pauses, next_grasp), PICK))
    return starts


def _by_pauses(
    pauses: list[Keystate], ts: np.ndarray, task: str, min_pause_s: float
) -> list[tuple[int, str]]:
    cuts = [p.frame_index for p in pauses if float(ts[p.end_index] - ts[p.start_index]) >= min_pause_s]
    if not cuts:
        return [(0, task or "perform the task")]
    count = len(cuts) + 1
    base = task or "move"
    return [(start, f"{base} (part {k + 1} of {count})") for k, start in enumerate([0, *cuts])]


def _clean(starts: list[tuple[int, str]], n: int) -> list[tuple[int, str]]:
    """Strictly increasing starts within the episode; a later phase on the same frame wins."""
    out: list[tuple[int, str]] = []
    for index, text in starts:
        if index >= n:
            continue
        if out and index <= out[-1][0]:
            out[-1] = (out[-1][0], text)
        else:
            out.append((index, text))
        if len(out) > 1 and out[-1][1] == out[-2][1]:
            out.pop()
    return out
