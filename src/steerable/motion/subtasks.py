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
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from steerable.motion.dims import DimSelection
from steerable.motion.keystates import Keystate
from steerable.motion.naming import (
    GENERIC,
    Naming,
    Phase,
    UnitKind,
    match_task,
    memory_at,
    phase_texts,
    plan_at,
    regrips,
)
from steerable.motion.params import Granularity, MotionParams
from steerable.motion.trajectory import Contact, Trajectory

__all__ = ["FINE_TEXTS", "PICK", "PLACE", "PUSH", "HeuristicLanguage", "heuristic_language", "heuristic_subtasks"]

FINE_TEXTS = {k: GENERIC[k] for k in ("reach", "grasp", "move", "release", "retreat")}
PICK = GENERIC["pick"]
PLACE = GENERIC["place"]
PUSH = GENERIC["push"]

Pair = tuple[Keystate, "Keystate | None"]
L = TypeVar("L", bound=str)  # a phase (`naming.Phase`) or a row's text


@dataclass(frozen=True)
class HeuristicLanguage:
    """An episode's heuristic rows: its subtasks, and, when the task named its units, a plan and a
    memory at each subtask (`named`); `note` says what happened, for the run summary."""

    rows: list[dict[str, Any]]
    named: bool
    note: str | None


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
    name_from_task: bool = True,
) -> list[dict[str, Any]]:
    """The subtask rows of `heuristic_language` (named from the task where it names the units)."""
    found = heuristic_language(timestamps, keystates, task, granularity=granularity, min_pause_s=min_pause_s,
                               state=state, dims=dims, params=params, name_from_task=name_from_task)
    return [r for r in found.rows if r["style"] == "subtask"]


def heuristic_language(
    timestamps: np.ndarray,
    keystates: Sequence[Keystate],
    task: str,
    *,
    granularity: Granularity = "fine",
    min_pause_s: float = 0.3,
    state: np.ndarray | None = None,
    dims: DimSelection | None = None,
    params: MotionParams | None = None,
    name_from_task: bool = True,
) -> HeuristicLanguage:
    """Subtask rows covering the episode from its first frame, on stored frame timestamps.

    With grasp/release pairs: "fine" gives reach, grasp, move, release, retreat; "coarse" gives
    pick / place. Without gripper events the episode is cut at pauses of at least `min_pause_s`
    into "<task> (part k of n)", or is one row with the task when the arm never pauses.
    With `state` (the episode's matrix of `dims.state_key`) and `dims`, the hand's path refines the
    cuts (see the module docstring), with the thresholds of `params` (defaults when None).
    With `name_from_task`, the units are named from the task's steps where those match them
    (`steerable.motion.naming`), and the rows gain a plan and a memory at each subtask.
    """
    ts = np.asarray(timestamps)
    if len(ts) == 0:
        return HeuristicLanguage([], False, None)
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
    if not (pairs or pushes):
        starts = _by_pauses(pauses, ts, task, min_pause_s)
        cuts = _clean([(i, text, 0) for i, text in starts], len(ts))
        return HeuristicLanguage([_row(float(ts[i]), text) for i, text, _ in cuts], False, None)
    items: list[Item] = sorted([*pairs, *pushes], key=_item_start)
    naming = Naming(None, "")
    if name_from_task:
        naming = match_task(task, _kinds(items))
        if naming.units is None and path is not None:
            joined = _join_regrips(items, task, path)
            if joined is not None:
                items, naming = joined, match_task(task, _kinds(joined))
    units = naming.units
    phases = _clean(_manipulation(items, pauses, len(ts), granularity, path), len(ts))
    texts = [phase_texts(units[item] if units else None)[phase] for _, phase, item in phases]
    rows = [_row(float(ts[i]), text) for (i, _, _), text in zip(phases, texts, strict=True)]
    if units is None:
        return HeuristicLanguage(rows, False, f"subtasks unnamed: {naming.reason}" if naming.reason else None)
    known = [(phase, item) for _, phase, item in phases]
    for k, (i, _, _) in enumerate(phases):
        rows.append(_row(float(ts[i]), plan_at(texts, k), "plan"))
        if k:
            rows.append(_row(float(ts[i]), memory_at(known, units, k), "memory"))
    return HeuristicLanguage(rows, True, "subtasks, plan and memory named from the task's steps")


def _kinds(items: list[Item]) -> list[UnitKind]:
    return ["contact" if isinstance(i, Contact) else "pair" for i in items]


def _join_regrips(items: list[Item], task: str, path: Trajectory) -> list[Item] | None:
    """`items` with the re-grips the task implies joined (one grasp to the last release), or None.

    A task naming fewer pick-and-places than the motion shows may be one thing set down and taken
    again where it was left (`naming.regrips`): those pairs become one, from its first grasp to its
    last release, and its phases are timed as one.
    """
    gaps = [path.gap(a[1], b[0]) if isinstance(a, tuple) and isinstance(b, tuple) and a[1] is not None
            else float("inf") for a, b in zip(items, items[1:], strict=False)]
    chosen = regrips(task, _kinds(items), gaps)
    if not chosen:
        return None
    out: list[Item] = []
    for k, item in enumerate(items):
        if k - 1 in chosen and isinstance(item, tuple) and isinstance(out[-1], tuple):
            out[-1] = (out[-1][0], item[1])
        else:
            out.append(item)
    return out


def _row(timestamp: float, text: str, style: str = "subtask") -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": text,
        "style": style,
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
    items: list[Item],
    pauses: list[Keystate],
    n: int,
    granularity: Granularity,
    path: Trajectory | None,
) -> list[tuple[int, Phase, int]]:
    """(start frame, phase, unit) of each phase, in order; `items` sorted by start."""
    fine = granularity == "fine"

    def opening(j: int) -> Phase:
        return "push" if isinstance(items[j], Contact) else "pick"

    starts: list[tuple[int, Phase, int]] = [(0, "reach" if fine else opening(0), 0)]
    for i, item in enumerate(items):
        more = i + 1 < len(items)
        next_start = _item_start(items[i + 1]) if more else n
        # What follows a unit: reaching for the next one (or its opening, coarse), or the retreat.
        after: tuple[Phase, int] | None = None
        if fine:
            after = ("reach", i + 1) if more else ("retreat", i)
        elif more:
            after = (opening(i + 1), i + 1)
        if isinstance(item, Contact):
            if fine:
                starts.append((item.start_index, "push", i))
            if after is not None:
                starts.append((_settle(item.end_index, pauses, next_start, path), *after))
            continue
        grasp, release = item
        release_onset = release.start_index if release is not None else n
        if fine:
            starts.append((grasp.start_index, "grasp", i))
        starts.append((_settle(grasp.end_index, pauses, release_onset, path), "move" if fine else "place", i))
        if release is None:
            continue
        if fine:
            starts.append((release.start_index, "release", i))
        if after is not None:
            starts.append((_settle(release.end_index, pauses, next_start, path), *after))
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


def _clean(starts: list[tuple[int, L, int]], n: int) -> list[tuple[int, L, int]]:
    """Strictly increasing starts within the episode; a later phase on the same frame wins.

    A phase repeating the one before it merges into it, except a push: two pushes in a row are two.
    `starts`: (frame, phase or text, unit); the cuts at pauses pass their texts, which never repeat.
    """
    out: list[tuple[int, L, int]] = []
    for index, label, item in starts:
        if index >= n:
            continue
        if out and index <= out[-1][0]:
            out[-1] = (out[-1][0], label, item)
        else:
            out.append((index, label, item))
        if len(out) > 1 and out[-1][1] == out[-2][1] and label != "push":
            out.pop()
    return out
