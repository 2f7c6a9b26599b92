"""The object description of a dataset: `meta/objects.json`, which objects its state tracks and where.

A policy that grounds words in positions (`steerable.policy.objects`) learns nothing about a world
from the names of its state dimensions: it reads this file. It names the end effector's x, y, z
dimensions, every object the text can name (its display name, as commands spell it; its kind, which
groups interchangeable names for the policy's name slots; the state feature and dimensions that hold
its x, y and optionally z and `present`), and the lengths of its world, in the units of the state
(docs/make-dataset.md, "The object description"):

    {"format": 1,
     "end_effector": {"feature": "observation.state", "x": "ee.x", "y": "ee.y", "z": "ee.z"},
     "objects": [{"name": "mug", "kind": "cup", "feature": "observation.environment_state",
                  "x": "mug.x", "y": "mug.y", "z": "mug.z", "present": "mug.present"}, ...],
     "scales": {"relation": 0.1, "rest_height": 0.0, "check_clearance": 0.05, "check_band": 0.06,
                "fine_offsets": [4.0, 16.0]}}

A dimension is named as the feature's `names` list spells it, or given by its index in the feature.
The simulator writes the file for its datasets (`steerable.synthetic.object_schema`); a user writes
it by hand for theirs. A dataset without it has no object grounding, no step check and no object
name slots. Torch-free.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from steerable.dataset.atomic import atomic_write_bytes
from steerable.errors import ConfigError

__all__ = ["FORMAT", "OBJECTS_PATH", "Dim", "ObjectEntry", "ObjectSchema", "StateDims", "WorldScales",
           "parse_object_schema", "parse_scales", "read_object_schema", "write_object_schema"]

OBJECTS_PATH = "meta/objects.json"
FORMAT = 1

Dim = str | int  # a dimension's name in its feature's `names`, or its index


@dataclass(frozen=True)
class StateDims:
    """Where a thing's position sits: dimensions of one state feature (None: it has no such field)."""

    feature: str
    x: Dim
    y: Dim
    z: Dim | None = None
    present: Dim | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"feature": self.feature, "x": self.x, "y": self.y}
        out.update({k: v for k, v in (("z", self.z), ("present", self.present)) if v is not None})
        return out


@dataclass(frozen=True)
class ObjectEntry:
    """One object: `name` as the text spells it, `kind` (objects of one kind are interchangeable names
    for the name slots; "" for none), and where its fields sit."""

    name: str
    kind: str
    dims: StateDims

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, **({"kind": self.kind} if self.kind else {}), **self.dims.to_dict()}


@dataclass(frozen=True)
class WorldScales:
    """The lengths a policy needs of a world, in the state's units.

    `relation`: the length the step check's object-to-target offsets are divided by. `rest_height`:
    the height of an object resting on the work surface (and of a target without a height).
    `check_clearance`: the step check's counter-examples put the moved object at least this far from
    its target's centre (half that on a target with a height), and at most `check_band` farther.
    `fine_offsets`: magnifications of an object's normalised offset from the end effector (the
    offset divided by its spread over the dataset), read through tanh beside it: with a spread of
    about 15 cm, 4 and 16 make 4 cm and 1 cm read as one unit.
    """

    relation: float
    rest_height: float
    check_clearance: float
    check_band: float
    fine_offsets: tuple[float, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"relation": self.relation, "rest_height": self.rest_height, "check_clearance": self.check_clearance,
                "check_band": self.check_band, "fine_offsets": list(self.fine_offsets)}


@dataclass(frozen=True)
class ObjectSchema:
    """A parsed `meta/objects.json` (see the module docstring)."""

    end_effector: StateDims | None
    objects: tuple[ObjectEntry, ...]
    scales: WorldScales

    def to_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, "end_effector": None if self.end_effector is None else self.end_effector.to_dict(),
                "objects": [o.to_dict() for o in self.objects], "scales": self.scales.to_dict()}


def read_object_schema(root: Path | str) -> ObjectSchema | None:
    """The object description of the dataset at `root`, None when it has none."""
    path = Path(root) / OBJECTS_PATH
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ConfigError(f"{path}: not readable JSON ({exc})") from exc
    return parse_object_schema(data, path)


def write_object_schema(root: Path | str, schema: ObjectSchema) -> Path:
    """Write `schema` as `root/meta/objects.json` (atomically)."""
    path = Path(root) / OBJECTS_PATH
    data = schema.to_dict()
    # One object a line: a file a person reads and edits.
    objects = ",\n".join(f"  {json.dumps(o)}" for o in data["objects"])
    text = (f'{{"format": {data["format"]},\n "end_effector": {json.dumps(data["end_effector"])},\n'
            f' "objects": [\n{objects}\n ],\n "scales": {json.dumps(data["scales"])}}}\n')
    atomic_write_bytes(path, text.encode("utf-8"))
    return path


def parse_object_schema(data: Any, where: object = OBJECTS_PATH) -> ObjectSchema:
    """`data` (the file's JSON) checked; a ConfigError naming `where` and the bad entry otherwise."""
    top = _mapping(data, f"{where}", {"format", "end_effector", "objects", "scales"})
    if top.get("format", FORMAT) != FORMAT:
        raise ConfigError(f"{where}: format {top.get('format')!r}; this steerable reads format {FORMAT}")
    ee = top.get("end_effector")
    end_effector = None if ee is None else _dims(ee, f"{where}: end_effector", require_z=True)
    objects = top.get("objects", [])
    if not isinstance(objects, list):
        raise ConfigError(f"{where}: objects must be a list, got {type(objects).__name__}")
    entries = [_object(o, f"{where}: objects[{k}]") for k, o in enumerate(objects)]
    seen: set[str] = set()
    for entry in entries:
        if entry.name.lower() in seen:
            raise ConfigError(f"{where}: two objects are named {entry.name!r}")
        seen.add(entry.name.lower())
    if "scales" not in top:
        raise ConfigError(f"{where}: no scales (relation, rest_height, check_clearance, check_band, fine_offsets)")
    return ObjectSchema(end_effector, tuple(entries), parse_scales(top["scales"], f"{where}: scales"))


def _mapping(value: Any, where: str, known: set[str]) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where} must be a JSON object, got {type(value).__name__}")
    unknown = sorted(set(value) - known)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {unknown}; known: {sorted(known)}")
    return value


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{where} must be a non-empty string, got {value!r}")
    return value.strip()


def _dim(value: Any, where: str) -> Dim:
    if isinstance(value, bool) or not isinstance(value, str | int) or (isinstance(value, int) and value < 0):
        raise ConfigError(f"{where} must be a dimension's name or index, got {value!r}")
    return _text(value, where) if isinstance(value, str) else value


def _dims(value: Any, where: str, *, require_z: bool = False, extra: frozenset[str] = frozenset()) -> StateDims:
    keys = {"feature", "x", "y", "z", "present", *extra}
    block = _mapping(value, where, keys)
    for key in ("feature", "x", "y", *(("z",) if require_z else ())):
        if key not in block:
            raise ConfigError(f"{where}: no {key!r}")
    optional = {k: _dim(block[k], f"{where}.{k}") for k in ("z", "present") if block.get(k) is not None}
    return StateDims(_text(block["feature"], f"{where}.feature"), _dim(block["x"], f"{where}.x"),
                     _dim(block["y"], f"{where}.y"), optional.get("z"), optional.get("present"))


def _object(value: Any, where: str) -> ObjectEntry:
    dims = _dims(value, where, extra=frozenset({"name", "kind"}))
    name = _text(value.get("name"), f"{where}.name")
    kind = value.get("kind")
    return ObjectEntry(name, "" if kind is None else _text(kind, f"{where}.kind"), dims)


def parse_scales(value: Any, where: str) -> WorldScales:
    """`WorldScales` from their JSON object (`WorldScales.to_dict`); a ConfigError naming `where` otherwise."""
    names = ("relation", "rest_height", "check_clearance", "check_band", "fine_offsets")
    block = _mapping(value, where, set(names))
    missing = [n for n in names if n not in block]
    if missing:
        raise ConfigError(f"{where}: no {', '.join(missing)}")
    lengths = {n: _number(block[n], f"{where}.{n}") for n in names[:4]}
    for n in ("relation", "check_clearance"):
        if lengths[n] <= 0:
            raise ConfigError(f"{where}.{n} must be > 0, got {lengths[n]}")
    if lengths["check_band"] < 0:
        raise ConfigError(f"{where}.check_band must be >= 0, got {lengths['check_band']}")
    fine = block["fine_offsets"]
    if not isinstance(fine, list):
        raise ConfigError(f"{where}.fine_offsets must be a list of magnifications, got {fine!r}")
    magnifications = tuple(_number(m, f"{where}.fine_offsets") for m in fine)
    if any(m <= 0 for m in magnifications):
        raise ConfigError(f"{where}.fine_offsets must all be > 0, got {fine}")
    return WorldScales(lengths["relation"], lengths["rest_height"], lengths["check_clearance"],
                       lengths["check_band"], magnifications)


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ConfigError(f"{where} must be a finite number, got {value!r}")
    return float(value)
