"""Heuristic subtask rows from keystates, for runs without a vision-language model.

Gripper events give the skeleton of a manipulation: an opening before the first grasp prepares
it, a close that is later released is a grasp, an opening while holding is a release, and a close
after the last release (a gripper going back to rest) is part of the retreat. The arm's first stop
after a grasp or release (the end of the lift) closes that phase. The text is templated, so the
caller labels these rows as heuristic in its summary.

Given the episode's `state` and `dims` as well, the hand's path refines this
(`trajectory.Trajectory`): a grasp that carried nothing (a missed grasp, a re-grasp in place)
joins the pick that follows instead of making a pick and place of its own; a low sideways move
with no gripper event becomes a "push the object" subtask; and a phase ends where the hand, risen
after its gripper event, sets off toward the next one, not at its first stop (which a hesitation
or a rest may bring early, and sensor noise may hide).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from steerable.motion.dims import DimSelection
from steerable.motion.keystates import Keystate
from steerable.motion.params import Granularity, MotionParams
from steerable.motion.trajectory import Contact, Trajectory

__all__ = ["FINE_TEXTS", "PICK", "PLACE", "PUSH", "heuristic_subtasks"]

FINE_TEXTS = {
    "reach": "reach for the object",
    "grasp": "grasp the object",
    "move": "move it to the target",
    "release": "release it",
    "retreat": "retreat",
}
PICK = "pick up the object"
PLACE = "place it at the target"
PUSH = "push the object"

Pair = tuple[Keystate, "Keystate | None"]


def heuristic_subtasks(
    timestamps: np.ndarray,
    keystates: Sequence[Keystate],
    task: str,
    *,
    granularity: Granularity = "fine",
    min_pause_s: float = 0.3,
    state: np.ndarray | None = None,
    dims: DimSelection | None = None,
    params: MotionParams | None = None,
) -> list[dict[str, Any]]:
    """Subtask rows covering the episode from its first frame, on stored frame timestamps.

    With grasp/release pairs: "fine" gives reach, grasp, move, release, retreat; "coarse" gives
    pick / place. Without gripper events the episode is cut at pauses of at least `min_pause_s`
    into "<task> (part k of n)", or is one row with the task when the arm never pauses.
    With `state` (the episode's matrix of `dims.state_key`) and `dims`, the hand's path refines the
    cuts (see the module docstring), with the thresholds of `params` (defaults when None).
    """
    ts = np.asarray(timestamps)
    if len(ts) == 0:
        return []
    ordered = sorted(keystates, key=lambda k: k.frame_index)
    pauses = [k for k in ordered if k.kind == "pause"]
    pairs = _grasp_release([k for k in ordered if k.kind != "pause"])
    path: Trajectory | None = None
    pushes: list[Contact] = []
    if state is not None and dims is not None:
        thresholds = params or MotionParams()
        path = Trajectory(
            ts,
            state,
            dims,
            smoothing_s=thresholds.smoothing_s,
            onset_speed_ratio=thresholds.onset_speed_ratio,
        )
        pairs = [p for p in pairs if p[1] is None or path.carried(p[0], p[1], thresholds.carry_ratio)]
        pushes = path.contacts(ordered, thresholds.push_travel_ratio)
    if pairs or pushes:
        starts = _manipulation(pairs, pushes, pauses, len(ts), granularity, path)
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


def _settle(after: int, pauses: list[Keystate], limit: int, path: Trajectory | None) -> int:
    """Where the phase that ends with the change at frame `after` hands over, before `limit`.

    With a path: where the hand sets off sideways after rising. Otherwise (or when it never does):
    the arm's first stop after `after`, else the frame just after it.
    """
    onset = path.set_off(after, limit) if path is not None else None
    if onset is not None:
        return onset
    stop = next((p.frame_index for p in pauses if after < p.frame_index < limit), None)
    return stop if stop is not None else after + 1


Item = Pair | Contact


def _item_start(item: Item) -> int:
    return item.start_index if isinstance(item, Contact) else item[0].start_index


def _manipulation(
    pairs: list[Pair],
    pushes: list[Contact],
    pauses: list[Keystate],
    n: int,
    granularity: Granularity,
    path: Trajectory | None,
) -> list[tuple[int, str]]:
    fine = granularity == "fine"
    items: list[Item] = sorted([*pairs, *pushes], key=_item_start)

    def opening(item: Item) -> str:
        return PUSH if isinstance(item, Contact) else PICK

    starts = [(0, FINE_TEXTS["reach"] if fine else opening(items[0]))]
    for i, item in enumerate(items):
        more = i + 1 < len(items)
        next_start = _item_start(items[i + 1]) if more else n
        after = (FINE_TEXTS["reach"] if more else FINE_TEXTS["retreat"]) if fine else None
        if isinstance(item, Contact):
            if fine:
                starts.append((item.start_index, PUSH))
            if fine or more:
                starts.append(
                    (_settle(item.end_index, pauses, next_start, path), after or opening(items[i + 1]))
                )
            continue
        grasp, release = item
        release_onset = release.start_index if release is not None else n
        if fine:
            starts.append((grasp.start_index, FINE_TEXTS["grasp"]))
        starts.append(
            (_settle(grasp.end_index, pauses, release_onset, path), FINE_TEXTS["move"] if fine else PLACE)
        )
        if release is None:
            continue
        if fine:
            starts.append((release.start_index, FINE_TEXTS["release"]))
        if fine or more:
            starts.append(
                (_settle(release.end_index, pauses, next_start, path), after or opening(items[i + 1]))
            )
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
    """Strictly increasing starts within the episode; a later phase on the same frame wins.

    A phase repeating the one before it merges into it, except a push: two pushes in a row are two.
    """
    out: list[tuple[int, str]] = []
    for index, text in starts:
        if index >= n:
            continue
        if out and index <= out[-1][0]:
            out[-1] = (out[-1][0], text)
        else:
            out.append((index, text))
        if len(out) > 1 and out[-1][1] == out[-2][1] and text != PUSH:
            out.pop()
    return out
