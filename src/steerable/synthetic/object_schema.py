"""The simulator's object description (`meta/objects.json`, `steerable.dataset.objects`).

`generate_synthetic` writes it into a dataset made with the privileged state: the end effector is
`ee.x`, `ee.y`, `ee.z` of `observation.state`, and each cube colour and receptacle of the palette is an
object of `observation.environment_state` in the layout of `steerable.synthetic.privileged` (its kind
the last word of its name: cube, bin, zone, the groups of its name slots). Without the privileged state
no object's position is recorded and no file is written: a description with no object grounds nothing,
and one that names the robot's state feature went stale when a user renamed it (a cameras-only dataset
with `observation.state` renamed `state` was refused by `train`). The world's lengths are the table's,
in metres.
"""

from __future__ import annotations

from steerable.dataset.objects import ObjectEntry, ObjectSchema, StateDims, WorldScales
from steerable.synthetic.privileged import ENVIRONMENT_STATE_FEATURE, ENVIRONMENT_STATE_NAMES
from steerable.synthetic.world import CUBE_COLORS, RECEPTACLE_COLORS, STATE_NAMES

__all__ = ["SIMULATOR_SCALES", "simulator_objects"]

# The simulator's lengths (metres, table frame). A relation (where a moved cube stands from its
# target) is read in tenths of a metre; a cube rests on the table at z 0; the step check's
# counter-examples put a cube 5 to 11 cm from its target's centre (a bin is 12 cm wide; half that on
# a cube); an object's offset from the gripper spreads about 15 cm over a dataset, so 4x and 16x its
# normalised value make about 4 cm and 1 cm read as one unit.
SIMULATOR_SCALES = WorldScales(relation=0.1, rest_height=0.0, check_clearance=0.05, check_band=0.06,
                               fine_offsets=(4.0, 16.0))
_STATE_FEATURE = "observation.state"


def simulator_objects(privileged_state: bool) -> ObjectSchema:
    """The description of a synthetic dataset, made with or without `--privileged_state`."""
    x, y, z = STATE_NAMES[:3]
    objects = []
    if privileged_state:
        names = [f"{color} cube" for color in CUBE_COLORS] + list(RECEPTACLE_COLORS)
        for name in names:
            slug = name.replace(" ", "_")
            fields = {f: f"{slug}.{f}" for f in ("x", "y", "z", "present") if f"{slug}.{f}" in ENVIRONMENT_STATE_NAMES}
            dims = StateDims(ENVIRONMENT_STATE_FEATURE, fields["x"], fields["y"], fields.get("z"), fields["present"])
            objects.append(ObjectEntry(name, name.split()[-1], dims))
    return ObjectSchema(StateDims(_STATE_FEATURE, x, y, z), tuple(objects), SIMULATOR_SCALES)
