"""The objects a policy knows of: where each sits in its state vector, and the words that name it.

They come from the dataset's object description (`meta/objects.json`, `steerable.dataset.objects`),
never from the names of the state's dimensions. `resolve_objects` turns the description into an
`ObjectLayout` over the policy's state vector (the `state_keys` features concatenated); the policy
config keeps it (`PolicyConfig.objects`, `ObjectLayout.to_dict`), so a checkpoint runs without its
dataset. A text token that appears in exactly one object's name ("red", "left") names that object;
`object_tokens` finds those tokens with the policy's tokenizer, once, when the policy is built. The
model then adds that object's state to the embedding of every such token
(`HierarchicalPolicy.named_objects`), so "pick up the red cube" carries where the red cube is: binding a
word to its slot of a 39-value vector is what a small policy fails to learn from a few dozen
demonstrations (benchmarks/README.md, "bc_baseline.py").

This module is torch-free: layouts and token lists only.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from steerable.dataset.objects import OBJECTS_PATH, Dim, ObjectSchema, StateDims, WorldScales, parse_scales
from steerable.errors import ConfigError

__all__ = ["AXES", "RELATION_WIDTH", "ObjectLayout", "ObjectSlots", "command_objects", "command_relation",
           "object_layout", "object_tokens", "resolve_objects"]

logger = logging.getLogger(__name__)

AXES = ("x", "y", "z")
# `command_relation`'s width: the x, y, z offsets and whether the target has a height.
RELATION_WIDTH = 4


@dataclass(frozen=True)
class ObjectSlots:
    """Where one object's fields sit in the state vector (None: the object has no such field)."""

    name: str
    axes: tuple[int | None, int | None, int | None]  # x, y, z
    present: int | None
    kind: str = ""


@dataclass(frozen=True)
class ObjectLayout:
    """The objects of a policy's state vector, its end effector's x, y, z, and the world's scales."""

    objects: tuple[ObjectSlots, ...]
    end_effector: tuple[int, int, int] | None
    scales: WorldScales

    def to_dict(self) -> dict[str, Any]:
        """What `PolicyConfig.objects` holds (plain JSON)."""
        return {"end_effector": None if self.end_effector is None else list(self.end_effector),
                "objects": [{"name": o.name, "kind": o.kind, "x": o.axes[0], "y": o.axes[1], "z": o.axes[2],
                             "present": o.present} for o in self.objects],
                "scales": self.scales.to_dict()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], state_dim: int = 0) -> ObjectLayout:
        """`to_dict`'s output checked (indices below `state_dim` when it is given); a ConfigError otherwise."""
        where = "policy.objects"
        if not isinstance(data, Mapping) or set(data) != {"end_effector", "objects", "scales"}:
            raise ConfigError(f"{where} must hold end_effector, objects and scales, got {data!r:.120}")

        def index(value: Any, what: str, optional: bool = False) -> int | None:
            if value is None and optional:
                return None
            if isinstance(value, bool) or not isinstance(value, int) or value < 0 or (state_dim and value >= state_dim):
                raise ConfigError(f"{where}: {what} must be an index into the {state_dim or ''} state values, "
                                  f"got {value!r}")
            return value

        ee = data["end_effector"]
        if ee is not None and (not isinstance(ee, list) or len(ee) != 3):
            raise ConfigError(f"{where}: end_effector must be the [x, y, z] indices or null, got {ee!r}")
        end_effector = None if ee is None else (_int(index(ee[0], "end_effector")), _int(index(ee[1], "end_effector")),
                                                _int(index(ee[2], "end_effector")))
        objects = []
        for k, o in enumerate(data["objects"] if isinstance(data["objects"], list) else []):
            if not isinstance(o, Mapping) or not isinstance(o.get("name"), str) or not o["name"].strip():
                raise ConfigError(f"{where}: objects[{k}] needs a name, got {o!r:.120}")
            axes = (index(o.get("x"), f"{o['name']}.x"), index(o.get("y"), f"{o['name']}.y"),
                    index(o.get("z"), f"{o['name']}.z", optional=True))
            objects.append(ObjectSlots(o["name"], axes, index(o.get("present"), f"{o['name']}.present", optional=True),
                                       str(o.get("kind") or "")))
        if not objects:
            raise ConfigError(f"{where}: no objects (an empty description is {{}})")
        return cls(tuple(objects), end_effector, parse_scales(data["scales"], f"{where}: scales"))

    def name_groups(self) -> list[list[str]]:
        """The objects' names grouped by kind, in state order: the name slots a dataset that describes its
        objects gives (`PolicyConfig.object_name_slots`). A kind with one object, or none, is no group."""
        kinds: dict[str, list[str]] = {}
        for slot in self.objects:
            if slot.kind:
                kinds.setdefault(slot.kind, []).append(slot.name)
        return [group for group in kinds.values() if len(group) >= 2]


def object_layout(cfg: Any) -> ObjectLayout | None:
    """The `ObjectLayout` of a `PolicyConfig` (its `objects`), None when it describes no objects."""
    return ObjectLayout.from_dict(cfg.objects, int(cfg.state_dim)) if cfg.objects else None


def resolve_objects(schema: ObjectSchema, state_keys: Sequence[str], features: Mapping[str, Any]
                    ) -> ObjectLayout | None:
    """`schema`'s objects over the state vector of `state_keys` (those features of the dataset's
    `features`, concatenated): None when none of its objects is in those features. An object (or the
    end effector) in another feature is not the policy's to see; one in a feature the dataset lacks,
    or on a dimension its feature does not have, is a ConfigError."""
    starts: dict[str, tuple[int, list[str] | None, int]] = {}
    at = 0
    for key in state_keys:
        size, names = _shape(features.get(key) or {})
        starts[key] = (at, names, size)
        at += size

    def place(dims: StateDims, what: str) -> dict[str, int | None] | None:
        if dims.feature not in features:
            raise ConfigError(f"{OBJECTS_PATH}: {what} is in {dims.feature!r}, which the dataset does not have")
        if dims.feature not in starts:
            return None
        start, names, size = starts[dims.feature]
        return {field: None if dim is None else start + _index(dim, names, size, f"{what}.{field}", dims.feature)
                for field, dim in (("x", dims.x), ("y", dims.y), ("z", dims.z), ("present", dims.present))}

    ee = None if schema.end_effector is None else place(schema.end_effector, "end_effector")
    objects = []
    for entry in schema.objects:
        found = place(entry.dims, entry.name)
        if found is None:
            logger.info("%s: %s is in %s, not in the policy's state (%s)", OBJECTS_PATH, entry.name,
                        entry.dims.feature, ",".join(state_keys))
            continue
        objects.append(ObjectSlots(entry.name, (found["x"], found["y"], found["z"]), found["present"], entry.kind))
    if not objects:
        return None
    end_effector = None if ee is None else (_int(ee["x"]), _int(ee["y"]), _int(ee["z"]))
    return ObjectLayout(tuple(objects), end_effector, schema.scales)


def _int(value: int | None) -> int:
    assert value is not None  # a required field (checked where it was read)
    return value


def _shape(feature: Mapping[str, Any]) -> tuple[int, list[str] | None]:
    size = 1
    for n in feature.get("shape") or [1]:
        size *= int(n)
    names = feature.get("names")
    return size, [str(n) for n in names] if isinstance(names, list) and len(names) == size else None


def _index(dim: Dim, names: list[str] | None, size: int, what: str, feature: str) -> int:
    if isinstance(dim, int):
        if dim >= size:
            raise ConfigError(f"{OBJECTS_PATH}: {what} is dimension {dim} of {feature!r}, which has {size}")
        return dim
    if names is None or dim not in names:
        known = f"its names: {names}" if names is not None else "it names no dimension (give an index)"
        raise ConfigError(f"{OBJECTS_PATH}: {what} is {dim!r}, not a dimension of {feature!r} ({known})")
    return names.index(dim)


def object_tokens(names: Sequence[str], tokenizer: Any) -> list[list[int]]:
    """Per object name of `names`, the token ids that name it and no other object.

    Each word of a name counts when the tokenizer spells it, as it reads inside a sentence (" red",
    after a space), as one token: a piece of a word ("le" of "left") would also match inside other
    words. Words shared by several names ("cube", "bin") name none of them.
    """
    ids = []
    for name in names:
        spelled = [tokenizer(" " + word, add_special_tokens=False)["input_ids"] for word in name.split()]
        ids.append({w[0] for w in spelled if len(w) == 1})
    owners: dict[int, int] = {}
    for token_ids in ids:
        for t in token_ids:
            owners[t] = owners.get(t, 0) + 1
    return [sorted(t for t in token_ids if owners[t] == 1) for token_ids in ids]


def command_objects(command: str, layout: ObjectLayout | None) -> tuple[ObjectSlots, ObjectSlots] | None:
    """(the object a command moves, where it moves it): the first two objects of `layout` whose whole
    names the command spells, in the order it spells them ("place the red cube in the blue bin": the
    red cube, the blue bin). None for a command naming fewer than two ("pick up the red cube")."""
    if layout is None:
        return None
    text = f" {command.lower()} "
    found = []
    for slot in layout.objects:
        at = text.find(f" {slot.name.lower()} ")
        if at >= 0:
            found.append((at, slot))
    if len(found) < 2:
        return None
    found.sort(key=lambda pair: pair[0])
    return found[0][1], found[1][1]


def command_relation(command: str, layout: ObjectLayout | None, state: Sequence[float]) -> list[float] | None:
    """Where the object `command` moves stands from its target in the raw `state`: the x, y, z offsets
    (a missing z counts as the resting height) divided by the world's relation length, and 1 when the
    target has a height (a cube to stack on). None for a command that does not move one named object
    to another, or a policy without objects (`layout` None)."""
    found = command_objects(command, layout)
    if found is None or layout is None:
        return None
    moved, target = found
    rest, scale = layout.scales.rest_height, layout.scales.relation
    out = []
    for a, b in zip(moved.axes, target.axes, strict=True):
        here = float(state[a]) if a is not None else rest
        there = float(state[b]) if b is not None else rest
        out.append((here - there) / scale)
    return [*out, 1.0 if target.axes[2] is not None else 0.0]
