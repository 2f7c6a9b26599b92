"""Checkpoints from before the object description: their objects rebuilt from their state's names.

Until datasets declared their objects (`meta/objects.json`, `steerable.dataset.objects`), a policy
found them by a naming convention of the state: dimensions named `<object>.<field>` (`red_cube.x`),
an object being a group with an `x` and a `y` field, its name the group's with `_` read as a space,
its kind the last word of that name, and the end effector the group `ee`; the world's lengths were
the simulator's, written into the policy. Such a checkpoint's config has no `objects`.
`migrate_objects` builds that description once, when `load_policy` reads the config, so the model
has one code path. This module is the only place the convention and those lengths survive: nothing
else may read a state's names for objects (`tests/test_object_schema.py` checks it).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from steerable.dataset.objects import WorldScales
from steerable.policy.objects import ObjectLayout, ObjectSlots

__all__ = ["migrate_objects"]

_END_EFFECTOR = "ee"
# The simulator's lengths those checkpoints were trained with (metres): the relation's tenths of a
# metre, the table at z 0, the step check's default clearance and its 6 cm band, and the fine
# offsets' magnifications (an offset's spread being about 15 cm there).
_OLD_SCALES = WorldScales(relation=0.1, rest_height=0.0, check_clearance=0.05, check_band=0.06,
                          fine_offsets=(4.0, 16.0))


def migrate_objects(settings: Mapping[str, Any]) -> dict[str, Any]:
    """A checkpoint's `PolicyConfig` settings with `objects` built from its `state_names` by the old
    convention when it has no `objects` (`{}` for a state that names no object); else as they are."""
    out = dict(settings)
    if "objects" in out:
        return out
    clearance = float(out.get("check_clearance") or _OLD_SCALES.check_clearance)
    layout = _old_layout([str(n) for n in out.get("state_names") or []], clearance)
    out["objects"] = {} if layout is None else layout.to_dict()
    return out


def _old_layout(names: Sequence[str], clearance: float) -> ObjectLayout | None:
    groups: dict[str, dict[str, int]] = {}
    for i, name in enumerate(names):
        if "." in name:
            group, field = name.rsplit(".", 1)
            groups.setdefault(group, {}).setdefault(field, i)
    objects = []
    for group, fields in groups.items():
        if group == _END_EFFECTOR or "x" not in fields or "y" not in fields:
            continue
        name = group.replace("_", " ")
        objects.append(ObjectSlots(name, (fields["x"], fields["y"], fields.get("z")), fields.get("present"),
                                   name.split()[-1]))
    if not objects:
        return None
    ee = groups.get(_END_EFFECTOR, {})
    end_effector = (ee["x"], ee["y"], ee["z"]) if all(a in ee for a in ("x", "y", "z")) else None
    return ObjectLayout(tuple(objects), end_effector, dataclasses.replace(_OLD_SCALES, check_clearance=clearance))
