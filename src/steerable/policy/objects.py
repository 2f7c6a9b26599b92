"""Named objects in the state vector, and the words that name them.

A state whose dimensions are named `<object>.<field>` (`red_cube.x`, `red_cube.y`, `blue_bin.x`, ...;
the synthetic data's privileged state, or any dataset that tracks objects) describes objects. The
end effector is the group `ee` (`ee.x`, `ee.y`, `ee.z`). For each other group with an `x` and a `y`
field the policy knows where that object is, and its name is the group's with `_` read as a space
("red cube"). A text token that appears in exactly one object's name ("red", "blue", "left") names
that object; `object_tokens` finds those tokens with the policy's tokenizer, once, when the policy is
built. The model then adds that object's state to the embedding of every such token
(`HierarchicalPolicy.embed_text`), so "pick up the red cube" carries where the red cube is: binding a
word to its slot of a 39-value vector is what a small policy fails to learn from a few dozen
demonstrations (benchmarks/README.md, "bc_baseline.py").

This module is torch-free: layouts and token lists only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["AXES", "RELATION_WIDTH", "ObjectSlots", "command_objects", "command_relation", "end_effector_axes",
           "object_name_groups", "object_slots", "object_tokens"]

AXES = ("x", "y", "z")
_END_EFFECTOR = "ee"


@dataclass(frozen=True)
class ObjectSlots:
    """Where one object's fields sit in the state vector (None: the object has no such field)."""

    name: str
    axes: tuple[int | None, int | None, int | None]  # x, y, z
    present: int | None


def _groups(names: Sequence[str]) -> dict[str, dict[str, int]]:
    groups: dict[str, dict[str, int]] = {}
    for i, name in enumerate(names):
        if "." not in name:
            continue
        group, field = name.rsplit(".", 1)
        groups.setdefault(group, {}).setdefault(field, i)
    return groups


def end_effector_axes(names: Sequence[str]) -> tuple[int, int, int] | None:
    """State indices of `ee.x`, `ee.y`, `ee.z`, or None when the state does not name all three."""
    ee = _groups(names).get(_END_EFFECTOR, {})
    if not all(a in ee for a in AXES):
        return None
    return (ee["x"], ee["y"], ee["z"])


def object_slots(names: Sequence[str]) -> list[ObjectSlots]:
    """The objects of a state named `<object>.<field>` (those with an `x` and a `y`), in state order."""
    out = []
    for group, fields in _groups(names).items():
        if group == _END_EFFECTOR or "x" not in fields or "y" not in fields:
            continue
        axes = (fields["x"], fields["y"], fields.get("z"))
        out.append(ObjectSlots(group.replace("_", " "), axes, fields.get("present")))
    return out


def object_name_groups(names: Sequence[str]) -> list[list[str]]:
    """The state's object names grouped by kind, the last word of a name ("red cube", "green cube" ->
    cubes; "left zone", "right zone" -> zones), in state order: the name slots a dataset that tracks
    its objects gives (`PolicyConfig.object_name_slots`). A kind with one object is no group."""
    kinds: dict[str, list[str]] = {}
    for slot in object_slots(names):
        kinds.setdefault(slot.name.split()[-1], []).append(slot.name)
    return [group for group in kinds.values() if len(group) >= 2]


def object_tokens(names: Sequence[str], tokenizer: Any) -> list[list[int]]:
    """Per object of `object_slots(names)`, the token ids that name it and no other object.

    Each word of a name counts when the tokenizer spells it, as it reads inside a sentence (" red",
    after a space), as one token: a piece of a word ("le" of "left") would also match inside other
    words. Words shared by several names ("cube", "bin") name none of them.
    """
    slots = object_slots(names)
    ids = []
    for slot in slots:
        spelled = [tokenizer(" " + word, add_special_tokens=False)["input_ids"] for word in slot.name.split()]
        ids.append({w[0] for w in spelled if len(w) == 1})
    owners: dict[int, int] = {}
    for token_ids in ids:
        for t in token_ids:
            owners[t] = owners.get(t, 0) + 1
    return [sorted(t for t in token_ids if owners[t] == 1) for token_ids in ids]


def command_objects(command: str, names: Sequence[str]) -> tuple[ObjectSlots, ObjectSlots] | None:
    """(the object a command moves, where it moves it): the first two objects of the state whose whole
    names the command spells, in the order it spells them ("place the red cube in the blue bin": the
    red cube, the blue bin). None for a command naming fewer than two ("pick up the red cube")."""
    text = f" {command.lower()} "
    found = []
    for slot in object_slots(names):
        at = text.find(f" {slot.name.lower()} ")
        if at >= 0:
            found.append((at, slot))
    if len(found) < 2:
        return None
    found.sort(key=lambda pair: pair[0])
    return found[0][1], found[1][1]


# `command_relation`'s width, and the length (metres) its offsets are divided by.
RELATION_WIDTH = 4
_RELATION_SCALE = 0.1


def command_relation(command: str, names: Sequence[str], state: Sequence[float]) -> list[float] | None:
    """Where the object `command` moves stands from its target in the raw `state`: the x, y, z offsets
    (a target without a height counts as z 0) in tenths of a metre, and 1 when the target has a height
    (a cube to stack on). None for a command that does not move one named object to another."""
    found = command_objects(command, names)
    if found is None:
        return None
    moved, target = found
    out = []
    for a, b in zip(moved.axes, target.axes, strict=True):
        here = float(state[a]) if a is not None else 0.0
        there = float(state[b]) if b is not None else 0.0
        out.append((here - there) / _RELATION_SCALE)
    return [*out, 1.0 if target.axes[2] is not None else 0.0]
