"""The simulated tabletop: cubes, bins/zones and a gripper, with grasp, release and push physics.

Units are metres in the table frame: x to the right, y towards the viewer (image rows), z up from
the table. The gripper's `closure` is the `gripper.closure` state dim: 0 = fully open (fingers 8 cm
apart), 1 = closed (fingers one cube width apart). The world is immutable: `step` returns a new state.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

__all__ = [
    "CUBE_COLORS",
    "CUBE_SIZE",
    "GRASP_THRESHOLD",
    "HOME",
    "PUSHER_RADIUS",
    "RECEPTACLE_COLORS",
    "STATE_NAMES",
    "TABLE_DEPTH",
    "TABLE_WIDTH",
    "Cube",
    "Gripper",
    "Receptacle",
    "Scene",
    "WorldState",
    "sample_world",
    "step",
    "support_height",
]

# The robot's state dims: ee.* in metres in the table frame; gripper.closure 0 = open .. 1 = closed
# (the name says which way). `steerable.synthetic.generate` re-exports it.
STATE_NAMES = ["ee.x", "ee.y", "ee.z", "gripper.closure"]
TABLE_WIDTH = 0.56
TABLE_DEPTH = 0.40
CUBE_SIZE = 0.04
# Closure at which the fingers hold (or let go of) a cube.
GRASP_THRESHOLD = 0.5
# How far from a cube's axis the fingers may close and still catch it.
_GRASP_RADIUS = 0.015
# Half-width of the gripper body when it pushes a cube sideways.
PUSHER_RADIUS = 0.012

CUBE_COLORS: dict[str, tuple[int, int, int]] = {
    "red": (214, 40, 40),
    "green": (46, 160, 67),
    "orange": (245, 130, 32),
    "purple": (128, 60, 170),
    "pink": (240, 110, 170),
    "cyan": (30, 190, 200),
}
RECEPTACLE_COLORS: dict[str, tuple[int, int, int]] = {
    "blue bin": (40, 80, 200),
    "yellow bin": (235, 200, 30),
    "grey bin": (110, 110, 120),
    "left zone": (250, 250, 250),
    "right zone": (250, 250, 250),
}
# Receptacle slots (x0, y0, x1, y1); zones are tied to their side of the table.
_SLOTS = {
    "left": (0.02, 0.14, 0.14, 0.26),
    "right": (0.42, 0.14, 0.54, 0.26),
    "top": (0.22, 0.02, 0.34, 0.14),
    "bottom": (0.22, 0.26, 0.34, 0.38),
}


@dataclass(frozen=True)
class Cube:
    name: str
    color: tuple[int, int, int]
    size: float = CUBE_SIZE


@dataclass(frozen=True)
class Receptacle:
    """A bin (a shallow tray with a coloured rim) or a zone (a region marked with tape)."""

    name: str
    color: tuple[int, int, int]
    kind: str
    rect: tuple[float, float, float, float]

    @property
    def center(self) -> tuple[float, float]:
        x0, y0, x1, y1 = self.rect
        return ((x0 + x1) / 2, (y0 + y1) / 2)


@dataclass(frozen=True)
class Scene:
    """What does not move: the cubes' identities, the receptacles and the table's texture phase."""

    cubes: tuple[Cube, ...]
    receptacles: tuple[Receptacle, ...]
    texture_phase: float = 0.0

    def cube_index(self, name: str) -> int:
        for i, cube in enumerate(self.cubes):
            if cube.name == name:
                return i
        raise KeyError(name)

    def receptacle(self, name: str) -> Receptacle:
        for rec in self.receptacles:
            if rec.name == name:
                return rec
        raise KeyError(name)


@dataclass(frozen=True)
class Gripper:
    x: float
    y: float
    z: float
    closure: float

    def as_tuple(self) -> tuple[float, float, float, float]:
        return (self.x, self.y, self.z, self.closure)

    def as_array(self) -> np.ndarray:
        return np.array(self.as_tuple(), dtype=np.float64)


HOME = Gripper(TABLE_WIDTH / 2, TABLE_DEPTH / 2, 0.15, 0.0)


@dataclass(frozen=True)
class WorldState:
    """Everything that moves: the gripper, each cube's bottom-centre position, the held cube."""

    scene: Scene
    gripper: Gripper
    positions: tuple[tuple[float, float, float], ...]
    held: int | None = None


def support_height(state: WorldState, x: float, y: float, exclude: int | None = None) -> float:
    """Height a cube released at (x, y) comes to rest on: the table or the top of a cube below."""
    top = 0.0
    for i, (cx, cy, cz) in enumerate(state.positions):
        if i in (exclude, state.held):
            continue
        half = state.scene.cubes[i].size / 2
        if abs(cx - x) < half and abs(cy - y) < half:
            top = max(top, cz + state.scene.cubes[i].size)
    return top


def step(state: WorldState, gripper: Gripper) -> WorldState:
    """Move the gripper to `gripper`; grasp when the fingers close on a cube, drop it when they open,
    push a cube it runs into sideways."""
    held = state.held
    positions = list(state.positions)
    was_closed = state.gripper.closure >= GRASP_THRESHOLD
    closed = gripper.closure >= GRASP_THRESHOLD
    if closed and not was_closed and held is None:
        held = _cube_between_fingers(state, gripper)
    elif was_closed and not closed and held is not None:
        x, y, _ = positions[held]
        positions[held] = (x, y, support_height(state, x, y, exclude=held))
        held = None
    if held is not None:
        size = state.scene.cubes[held].size
        positions[held] = (gripper.x, gripper.y, max(0.0, gripper.z - size / 2))
    _push(state, gripper, positions, held)
    return replace(state, gripper=gripper, positions=tuple(positions), held=held)


def _push(
    state: WorldState, gripper: Gripper, positions: list[tuple[float, float, float]], held: int | None
) -> None:
    """Slide a cube the gripper runs into sideways, below the cube's top: it ends up just ahead.

    Only a horizontal entry pushes (the gripper was outside the cube's reach the frame before),
    so lowering onto a cube to grasp it, or hovering over it, never does.
    """
    before = state.gripper
    for i, (cx, cy, cz) in enumerate(positions):
        size = state.scene.cubes[i].size
        if i == held or not cz <= gripper.z < cz + size:
            continue
        reach = size / 2 + PUSHER_RADIUS
        inside = abs(gripper.x - cx) < reach and abs(gripper.y - cy) < reach
        was_inside = abs(before.x - cx) < reach - 1e-6 and abs(before.y - cy) < reach - 1e-6
        if not inside or was_inside:
            continue
        # Out through the side the gripper came in by (so a fast move cannot tunnel through).
        if abs(before.x - cx) - abs(before.y - cy) >= 0:
            cx = gripper.x + (reach if cx >= before.x else -reach)
        else:
            cy = gripper.y + (reach if cy >= before.y else -reach)
        positions[i] = (cx, cy, cz)


def _cube_between_fingers(state: WorldState, gripper: Gripper) -> int | None:
    for i, (cx, cy, cz) in enumerate(state.positions):
        size = state.scene.cubes[i].size
        near = np.hypot(cx - gripper.x, cy - gripper.y) <= _GRASP_RADIUS
        if near and cz <= gripper.z <= cz + size:
            return i
    return None


def sample_world(rng: np.random.Generator) -> WorldState:
    """A random scene (3-4 cubes, 2-3 receptacles) with the gripper at home, open."""
    n_receptacles = int(rng.integers(2, 4))
    names = list(RECEPTACLE_COLORS)
    chosen = [names[i] for i in rng.permutation(len(names))]
    receptacles: list[Receptacle] = []
    free_slots = list(_SLOTS)
    for name in chosen:
        if len(receptacles) == n_receptacles:
            break
        if name.endswith("zone"):
            side = name.split()[0]
            if side not in free_slots:
                continue
            slot = side
        else:
            slot = free_slots[int(rng.integers(len(free_slots)))]
        free_slots.remove(slot)
        kind = "zone" if name.endswith("zone") else "bin"
        receptacles.append(Receptacle(name, RECEPTACLE_COLORS[name], kind, _SLOTS[slot]))
    n_cubes = int(rng.integers(3, 5))
    colors = list(CUBE_COLORS)
    cubes = tuple(
        Cube(f"{colors[i]} cube", CUBE_COLORS[colors[i]])
        for i in sorted(rng.permutation(len(colors))[:n_cubes])
    )
    positions = _place_cubes(rng, len(cubes), receptacles)
    scene = Scene(cubes, tuple(receptacles), texture_phase=float(rng.uniform(0, 2 * np.pi)))
    return WorldState(scene, HOME, positions)


def _place_cubes(
    rng: np.random.Generator, count: int, receptacles: list[Receptacle]
) -> tuple[tuple[float, float, float], ...]:
    """Rejection-sample cube positions on free table, apart from receptacles and each other."""
    margin = CUBE_SIZE
    placed: list[tuple[float, float, float]] = []
    while len(placed) < count:
        x = float(rng.uniform(margin, TABLE_WIDTH - margin))
        y = float(rng.uniform(margin, TABLE_DEPTH - margin))
        on_receptacle = any(
            r.rect[0] - margin < x < r.rect[2] + margin and r.rect[1] - margin < y < r.rect[3] + margin
            for r in receptacles
        )
        crowded = any(np.hypot(x - px, y - py) < 2.2 * CUBE_SIZE for px, py, _ in placed)
        if not on_receptacle and not crowded:
            placed.append((round(x, 4), round(y, 4), 0.0))
    return tuple(placed)
