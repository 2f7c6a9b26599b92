"""Names for the motion's units, from the steps the episode's task names (issue 39).

The motion annotator sees units (a grasp-to-release span, a gripper-free push) but not what they move.
When the task's steps (`steerable.language.task_steps`) are as many pick-and-places and pushes, in the
same order, as the units it found, unit k is step k: its pick names the step's object, its place the
step's place. Otherwise the units keep their unnamed texts and the reason goes in the run summary.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from steerable.language.task_steps import Manipulation, manipulations, memory_text, parse_task, plan_text

__all__ = ["GENERIC", "REGRIP_GAP", "Naming", "Phase", "UnitKind", "match_task", "memory_at", "phase_texts", "plan_at",
           "regrips"]

# A release and the next grasp this close (share of the hand's extent) may be one thing set down and
# taken again: a re-grip, one step of the task, when the task names fewer pick-and-places.
REGRIP_GAP = 0.15

Phase = Literal["reach", "grasp", "move", "release", "retreat", "pick", "place", "push"]
UnitKind = Literal["pair", "contact"]

# The texts of a unit nothing names (the task reads as no steps, or not as these units).
GENERIC: dict[Phase, str] = {
    "reach": "reach for the object",
    "grasp": "grasp the object",
    "move": "move it to the target",
    "release": "release it",
    "retreat": "retreat",
    "pick": "pick up the object",
    "place": "place it at the target",
    "push": "push the object",
}


@dataclass(frozen=True)
class Naming:
    """The task's units, one per motion unit (None: unnamed), and why not when they are not."""

    units: list[Manipulation] | None
    reason: str


def match_task(task: str, kinds: Sequence[UnitKind]) -> Naming:
    """The task's steps as the motion's units `kinds` (in order), or why they cannot be."""
    steps = parse_task(task)
    if not steps:
        return Naming(None, "the task names no steps the grammar reads")
    units = manipulations(steps)
    if units is None:
        return Naming(None, "the task names steps other than pick, place and push")
    said = ["push" if u.kind == "push" else "pick-and-place" for u in units]
    seen = ["push" if k == "contact" else "pick-and-place" for k in kinds]
    if said != seen:
        return Naming(None, f"the task names {_count(said)}, the motion shows {_count(seen)}")
    return Naming(units, "")


def regrips(task: str, kinds: Sequence[UnitKind], gaps: Sequence[float]) -> list[int]:
    """Which boundaries between motion units (k: between unit k and k + 1) are re-grips to join so the
    motion shows the units the task names, closest first; [] when no such joining exists.

    `gaps[k]`: how far the hand moved from unit k's release to unit k + 1's grasp (`Trajectory.gap`).
    Only two pick-and-places in a row with a gap under `REGRIP_GAP` may join.
    """
    steps = parse_task(task)
    units = manipulations(steps) if steps else None
    if units is None:
        return []
    want = ["contact" if u.kind == "push" else "pair" for u in units]
    have = list(kinds)
    extra = len(have) - len(want)
    if extra <= 0 or have.count("contact") != want.count("contact"):
        return []
    joinable = sorted((g, k) for k, g in enumerate(gaps)
                      if g < REGRIP_GAP and have[k] == "pair" and have[k + 1] == "pair")
    if len(joinable) < extra:
        return []
    chosen = sorted(k for _, k in joinable[:extra])
    merged = [kind for k, kind in enumerate(have) if k - 1 not in chosen]
    return chosen if merged == want else []


def phase_texts(unit: Manipulation | None) -> dict[Phase, str]:
    """What each phase of `unit` is called; the unnamed texts without a unit."""
    if unit is None:
        return GENERIC
    thing = unit.thing
    texts: dict[Phase, str] = {**GENERIC, "reach": f"reach for {thing}", "grasp": f"grasp {thing}",
                               "release": f"release {thing}"}
    first = unit.subtasks()
    if unit.kind == "push":
        texts["push"] = first[0]
        return texts
    texts["pick"] = first[0]
    if unit.place:
        texts["place"] = first[1]
        texts["move"] = f"move {thing} {_towards(unit.place)}"
    return texts


def plan_at(texts: Sequence[str], k: int) -> str:
    """The plan at subtask `k`: the subtasks from it on."""
    return plan_text(list(texts[k:]))


def memory_at(phases: Sequence[tuple[Phase, int]], units: Sequence[Manipulation], k: int) -> str:
    """What is done and held when subtask `k` (of `phases`: each subtask's phase and unit) starts."""
    phase, item = phases[k]
    done = [u for j, u in enumerate(units) if j < item or (j == item and phase == "retreat")]
    holding = units[item].thing if phase in ("place", "move", "release") else None
    return memory_text(done, holding)


def _towards(place: str) -> str:
    """"in the yellow bin" -> "to the yellow bin": where a carried thing is going."""
    for prep in ("into ", "in ", "onto ", "on top of ", "on ", "inside "):
        if place.startswith(prep):
            return "to " + place[len(prep):]
    return place


def _count(kinds: list[str]) -> str:
    if not kinds:
        return "nothing"
    order = list(dict.fromkeys(kinds))
    return " and ".join(f"{kinds.count(k)} {k}{'es' if k == 'push' and kinds.count(k) > 1 else ''}"
                        f"{'s' if k != 'push' and kinds.count(k) > 1 else ''}" for k in order)
