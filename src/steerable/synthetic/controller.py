"""The scripted low-level controller (a test double): executes grammar commands in the simulator.

It reads the privileged world state, so it needs no cameras. Motion is a speed-limited approach to
the next waypoint (fast far away, slowing near it), recomputed from the live state on every chunk,
so a discarded chunk or a changed command never leaves it with a stale plan.
"""

from __future__ import annotations

import numpy as np

from steerable.control import ActionChunk, Observation
from steerable.synthetic.commands import DIRECTIONS, Command, CommandError, parse_command
from steerable.synthetic.expert import place_position
from steerable.synthetic.tasks import PUSH_DISTANCE, Step
from steerable.synthetic.world import HOME, PUSHER_RADIUS, Gripper, WorldState, step, support_height

__all__ = ["ScriptedController"]

_XY_TOL = 0.002
_Z_TOL = 0.003
_OPEN = 0.02


class ScriptedController:
    """Executes `pick up ...`, `place it in ...`, `push ...`, `open/close the gripper`, `go home`
    (`steerable.synthetic.commands`)."""

    name = "scripted controller (test double)"
    wants_images = False

    def __init__(
        self, fps: int = 15, *, speed: float = 0.3, travel_z: float = 0.12, chunk: int = 8, grip_seconds: float = 0.35
    ) -> None:
        self.dt = 1.0 / fps
        self.speed = speed
        self.travel_z = travel_z
        self.chunk = chunk
        self.grip_step = self.dt / grip_seconds
        self._last_held: int | None = None
        self._command = ""
        self._origins: dict[int, tuple[float, float, float]] = {}  # where a pushed cube started

    def reset(self) -> None:
        self._last_held = None
        self._command = ""
        self._origins.clear()

    # -- one step of motion ------------------------------------------------------------------
    def _toward(self, pose: np.ndarray, target: np.ndarray) -> np.ndarray:
        out = pose.copy()
        delta = target[:3] - pose[:3]
        dist = float(np.linalg.norm(delta))
        if dist > 1e-9:
            step = min(dist, self.dt * min(self.speed, max(0.03, 4.0 * dist)))
            out[:3] = pose[:3] + delta * (step / dist)
        out[3] = pose[3] + float(np.clip(target[3] - pose[3], -self.grip_step, self.grip_step))
        return out

    def _place_xy(self, world: WorldState, cmd: Command, cube: int) -> tuple[float, float]:
        """The expert's placement for `cube`, not counting the cube itself in the receptacle (it is
        recomputed every step, so the slot must not move once the cube is over the receptacle)."""
        assert cmd.target is not None
        step_ = Step(world.scene.cubes[cube].name, cmd.target, stack=cmd.stack)
        return place_position(world, step_, exclude=cube)

    def _waypoint(self, world: WorldState, pose: np.ndarray, cmd: Command) -> np.ndarray | None | str:
        """The pose to head for next; None when the command is complete; a string when it cannot run."""
        x, y, z, closure = pose
        scene = world.scene
        up = np.array([x, y, self.travel_z, closure])
        if cmd.kind == "open":
            return None if closure <= _OPEN else np.array([x, y, z, 0.0])
        if cmd.kind == "close":
            return None if closure >= 1 - _OPEN else np.array([x, y, z, 1.0])
        if cmd.kind == "home":
            home = np.array([HOME.x, HOME.y, HOME.z, 0.0])
            return None if np.abs(pose - home).max() < _Z_TOL else self._travel(pose, home)
        if cmd.kind == "push":
            return self._push(world, pose, cmd)
        if cmd.kind == "pick":
            assert cmd.cube is not None
            i = scene.cube_index(cmd.cube)
            if world.held is not None and world.held != i:
                return f"cannot pick up the {cmd.cube}: already holding the {scene.cubes[world.held].name}"
            if world.held == i:
                return None if z >= self.travel_z - _Z_TOL else np.array([x, y, self.travel_z, 1.0])
            cx, cy, cz = world.positions[i]
            grasp = np.array([cx, cy, cz + scene.cubes[i].size / 2, 1.0])
            near = np.hypot(cx - x, cy - y) < _XY_TOL
            if near and abs(z - grasp[2]) < _Z_TOL:
                return grasp  # at the grasp pose: close the fingers
            if closure > _OPEN:
                return np.array([x, y, z, 0.0])  # a failed or stale grip: open first
            if near:
                return np.array([cx, cy, grasp[2], 0.0])
            return self._travel(pose, np.array([cx, cy, self.travel_z, 0.0]))
        # place
        held = world.held
        if held is None:
            cube = self._last_held if cmd.cube is None else scene.cube_index(cmd.cube)
            if cube is None:
                return "cannot place anything: the gripper is empty"
            px, py = self._place_xy(world, cmd, cube)
            cx, cy, _ = world.positions[cube]
            if np.hypot(cx - px, cy - py) > 0.01:
                return f"cannot place the {scene.cubes[cube].name}: it is not in the gripper"
            if closure > _OPEN:
                return np.array([x, y, z, 0.0])
            return None if z >= self.travel_z - _Z_TOL else up
        if cmd.cube is not None and scene.cube_index(cmd.cube) != held:
            return f"cannot place the {cmd.cube}: holding the {scene.cubes[held].name}"
        px, py = self._place_xy(world, cmd, held)
        size = scene.cubes[held].size
        drop_z = support_height(world, px, py, exclude=held) + size / 2 + 0.002
        if np.hypot(px - x, py - y) < _XY_TOL:
            if abs(z - drop_z) < _Z_TOL:
                return np.array([px, py, drop_z, 0.0])  # release
            return np.array([px, py, drop_z, closure])
        return self._travel(pose, np.array([px, py, self.travel_z, closure]))

    def _push(self, world: WorldState, pose: np.ndarray, cmd: Command) -> np.ndarray | None | str:
        """Come down behind the cube, slide it PUSH_DISTANCE along the direction, lift."""
        assert cmd.cube is not None and cmd.direction is not None
        scene = world.scene
        x, y, z, closure = pose
        i = scene.cube_index(cmd.cube)
        if world.held is not None:
            return f"cannot push the {cmd.cube} while holding the {scene.cubes[world.held].name}"
        ux, uy = DIRECTIONS[cmd.direction]
        cx, cy, cz = world.positions[i]
        ox, oy, _ = self._origins.setdefault(i, world.positions[i])
        if (cx - ox) * ux + (cy - oy) * uy >= PUSH_DISTANCE - 0.004:
            return None if z >= self.travel_z - _Z_TOL else np.array([x, y, self.travel_z, closure])
        if closure > _OPEN:
            return np.array([x, y, z, 0.0])
        reach = scene.cubes[i].size / 2 + PUSHER_RADIUS
        push_z = cz + scene.cubes[i].size / 2
        behind = (x - cx) * ux + (y - cy) * uy  # negative: the gripper is behind the cube
        lateral = abs((x - cx) * -uy + (y - cy) * ux)
        if abs(z - push_z) < _Z_TOL and lateral < _XY_TOL and behind < -reach + 0.002:
            # The stroke: the cube rides just ahead of the gripper, so stop `reach` short of its goal.
            end = PUSH_DISTANCE - reach
            ex = ox + ux * end if ux else cx
            ey = oy + uy * end if uy else cy
            return np.array([ex, ey, push_z, 0.0])
        bx, by = cx - ux * (reach + 0.01), cy - uy * (reach + 0.01)
        if np.hypot(bx - x, by - y) < _XY_TOL:
            return np.array([bx, by, push_z, 0.0])
        return self._travel(pose, np.array([bx, by, self.travel_z, 0.0]))

    def _travel(self, pose: np.ndarray, target: np.ndarray) -> np.ndarray:
        """Rise to travel height before moving sideways, so nothing is dragged across the table."""
        if np.hypot(*(target[:2] - pose[:2])) > 0.01 and pose[2] < self.travel_z - _Z_TOL:
            return np.array([pose[0], pose[1], self.travel_z, target[3]])
        return target

    # -- the protocol ----------------------------------------------------------------------------
    def act(self, observation: Observation, command: str) -> ActionChunk:
        world = observation.privileged
        if not isinstance(world, WorldState):
            raise TypeError("the scripted controller needs the simulator's privileged state (--env sim)")
        empty = np.zeros((0, 4), dtype=np.float32)
        try:
            cmd = parse_command(command, world.scene)
        except CommandError as exc:
            return ActionChunk(empty, error=str(exc), refused=True)
        if command != self._command:
            self._command = command
            self._origins.clear()
        pose = world.gripper.as_array()
        actions: list[np.ndarray] = []
        # Predict the world forward through the chunk (the simulator follows commands exactly).
        for _ in range(self.chunk):
            if world.held is not None:
                self._last_held = world.held
            target = self._waypoint(world, pose, cmd)
            if isinstance(target, str):
                return ActionChunk(np.array(actions, dtype=np.float32).reshape(-1, 4), error=target)
            if target is None:
                return ActionChunk(np.array(actions, dtype=np.float32).reshape(-1, 4), done=not actions)
            pose = self._toward(pose, target)
            actions.append(pose.astype(np.float32))
            world = step(world, Gripper(*(float(v) for v in pose)))
        return ActionChunk(np.array(actions, dtype=np.float32))
