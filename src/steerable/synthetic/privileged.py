"""Privileged environment state: where every object of the global palette is, in a fixed layout.

A model given this vector (beside the gripper state) can bind an object's name to its slot: slot k
is always the same cube colour or the same receptacle, whatever the scene. Per cube colour of
`CUBE_COLORS`: `x, y, z, present` (the cube's bottom centre in metres, table frame; a held cube
keeps its live position); per receptacle of `RECEPTACLE_COLORS`: `x, y, present` (its centre).
An object absent from the scene is all zeros, `present` = 0.
"""

from __future__ import annotations

import numpy as np

from steerable.control import ENVIRONMENT_STATE_FEATURE  # the dataset feature holding the vector
from steerable.synthetic.world import CUBE_COLORS, RECEPTACLE_COLORS, Scene, WorldState

__all__ = ["ENVIRONMENT_STATE_FEATURE", "ENVIRONMENT_STATE_NAMES", "environment_state"]


def _slug(name: str) -> str:
    return name.replace(" ", "_")


_CUBE_FIELDS = ("x", "y", "z", "present")
_RECEPTACLE_FIELDS = ("x", "y", "present")
ENVIRONMENT_STATE_NAMES: tuple[str, ...] = (
    *(f"{_slug(color)}_cube.{f}" for color in CUBE_COLORS for f in _CUBE_FIELDS),
    *(f"{_slug(name)}.{f}" for name in RECEPTACLE_COLORS for f in _RECEPTACLE_FIELDS),
)
_CUBE_SLOT = {f"{color} cube": i * len(_CUBE_FIELDS) for i, color in enumerate(CUBE_COLORS)}
_RECEPTACLE_SLOT = {
    name: len(CUBE_COLORS) * len(_CUBE_FIELDS) + i * len(_RECEPTACLE_FIELDS)
    for i, name in enumerate(RECEPTACLE_COLORS)
}


# The last scene's layout: its receptacles written once, and where each of its cubes goes (a simulator
# asks for the vector every step, and a scene's receptacles and cubes do not change within an episode).
_last_layout: tuple[Scene, np.ndarray, tuple[int, ...]] | None = None


def _layout(scene: Scene) -> tuple[np.ndarray, tuple[int, ...]]:
    global _last_layout
    cached = _last_layout
    if cached is not None and cached[0] is scene:
        return cached[1], cached[2]
    template = np.zeros(len(ENVIRONMENT_STATE_NAMES), dtype=np.float32)
    for rec in scene.receptacles:
        at = _RECEPTACLE_SLOT.get(rec.name)
        if at is None:
            raise ValueError(f"receptacle {rec.name!r} is not in the palette {sorted(_RECEPTACLE_SLOT)}")
        template[at: at + 3] = (*rec.center, 1.0)
    offsets = []
    for cube in scene.cubes:
        at = _CUBE_SLOT.get(cube.name)
        if at is None:
            raise ValueError(f"cube {cube.name!r} is not in the palette {sorted(_CUBE_SLOT)}")
        offsets.append(at)
    _last_layout = (scene, template, tuple(offsets))
    return template, tuple(offsets)


def environment_state(world: WorldState) -> np.ndarray:
    """The (len(ENVIRONMENT_STATE_NAMES),) float32 vector of `world` (see the module docstring)."""
    template, offsets = _layout(world.scene)
    out = template.copy()
    for at, (x, y, z) in zip(offsets, world.positions, strict=True):
        out[at: at + 4] = (x, y, z, 1.0)
    return out
