"""Where a cube is, in words, for the scripted planner's replies and the environment's reports.

Below `steerable.synthetic.env` (which re-exports it) and `steerable.synthetic.planner`, so the
planner reads the world without importing the environment that hands it out.
"""

from __future__ import annotations

from steerable.synthetic.world import WorldState

__all__ = ["describe_location"]


def describe_location(world: WorldState, cube: str) -> str:
    """Where a cube is, in words: in the gripper, in a receptacle, on another cube, on the table."""
    scene = world.scene
    i = scene.cube_index(cube)
    if world.held == i:
        return f"The {cube} is in the gripper."
    x, y, z = world.positions[i]
    for rec in scene.receptacles:
        x0, y0, x1, y1 = rec.rect
        if x0 <= x <= x1 and y0 <= y <= y1:
            return f"The {cube} is in the {rec.name}."
    if z > 1e-3:
        for j, (ox, oy, _) in enumerate(world.positions):
            if j != i and abs(ox - x) < 0.02 and abs(oy - y) < 0.02:
                return f"The {cube} is on the {scene.cubes[j].name}."
    return f"The {cube} is on the table."
