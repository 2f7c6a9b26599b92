"""The synthetic tabletop as an environment: reset with a seed and a task, step, render, check success.

Actions and states are what the synthetic dataset stores: `ee.x, ee.y, ee.z, gripper.closure`
(an absolute gripper pose target per step, metres in the table frame, closure 0 open .. 1 closed).
One `send_action` is one world step at `fps`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from steerable.errors import ConfigError
from steerable.runtime.protocols import Observation
from steerable.runtime.sim.grammar import CommandError, parse_task
from steerable.synthetic.commands import DIRECTIONS
from steerable.synthetic.difficulty import get_difficulty
from steerable.synthetic.generate import STATE_NAMES, camera_key
from steerable.synthetic.render import CAMERAS, render_frame
from steerable.synthetic.tasks import PUSH_DISTANCE, Step, TaskSpec, sample_task
from steerable.synthetic.world import (
    CUBE_SIZE,
    TABLE_DEPTH,
    TABLE_WIDTH,
    Gripper,
    WorldState,
    sample_world,
    step,
)

__all__ = ["SimEnv", "step_satisfied", "task_kind"]

_Z_MAX = 0.25


def step_satisfied(state: WorldState, target: Step, start: WorldState | None = None) -> bool:
    """Whether `target` holds in `state`: its cube rests (released) in its receptacle or on its target
    cube, or, for a push, has moved PUSH_DISTANCE (within 1.5 cm) that way since `start`."""
    scene = state.scene
    i = scene.cube_index(target.cube)
    if state.held == i:
        return False
    x, y, z = state.positions[i]
    if target.push:
        if start is None:
            return False
        ux, uy = DIRECTIONS[target.target]
        sx, sy, _ = start.positions[i]
        return (x - sx) * ux + (y - sy) * uy >= PUSH_DISTANCE - 0.015
    if target.stack:
        tx, ty, tz = state.positions[scene.cube_index(target.target)]
        half = scene.cubes[i].size / 2
        return abs(x - tx) < half and abs(y - ty) < half and abs(z - (tz + CUBE_SIZE)) < 1e-3
    x0, y0, x1, y1 = scene.receptacle(target.target).rect
    return x0 <= x <= x1 and y0 <= y <= y1


def task_kind(steps: tuple[Step, ...]) -> str:
    if any(s.push for s in steps):
        return "push"
    if any(s.stack for s in steps):
        return "stack"
    return "single" if len(steps) == 1 else f"{len(steps)}-step"


@dataclass
class _Episode:
    seed: int
    task: str
    steps: tuple[Step, ...] | None


class SimEnv:
    """The simulated tabletop; `privileged` observations carry the `WorldState` for scripted doubles."""

    fps: int
    action_dim: int = len(STATE_NAMES)
    state_names: tuple[str, ...] = tuple(STATE_NAMES)

    def __init__(self, *, fps: int = 15, cameras: tuple[str, ...] = ("top", "wrist")) -> None:
        unknown = [c for c in cameras if c not in CAMERAS]
        if unknown:
            raise ConfigError(f"unknown camera(s) {unknown}: the simulator has {', '.join(CAMERAS)}")
        self.fps = fps
        self.cameras = tuple(cameras)
        self.camera_keys = tuple(camera_key(c) for c in cameras)
        self.world: WorldState | None = None
        self.start: WorldState | None = None  # the scene as reset (push steps are measured from it)
        self.episode: _Episode | None = None
        self.steps_taken = 0

    def camera_shapes(self) -> dict[str, tuple[int, int, int]]:
        return {camera_key(c): (CAMERAS[c][1], CAMERAS[c][0], 3) for c in self.cameras}

    def reset(self, seed: int, task: str | None = None, *, difficulty: str = "easy") -> TaskSpec:
        """A new scene from `seed`; `task` (text) or, when None, one drawn like the synthetic dataset's
        at `difficulty` (easy: 1-2 steps and stacking; realistic / hard: up to 4 steps, pushes)."""
        rng = np.random.default_rng([seed, 7])
        self.world = sample_world(rng)
        self.start = self.world
        drawn = sample_task(self.world.scene, rng, get_difficulty(difficulty), self.world.positions)
        text = task if task is not None else drawn.text
        try:
            steps: tuple[Step, ...] | None = parse_task(text, self.world.scene)
        except CommandError:
            steps = None  # a free-form task: success cannot be checked
        self.episode = _Episode(seed, text, steps)
        self.steps_taken = 0
        return TaskSpec(text, steps or ())

    def _state(self) -> WorldState:
        if self.world is None:
            raise RuntimeError("call reset() before using the simulator")
        return self.world

    def observe(self, *, render: bool = True) -> Observation:
        world = self._state()
        images = {camera_key(c): render_frame(world, c) for c in self.cameras} if render else {}
        return Observation(
            state=world.gripper.as_array().astype(np.float32),
            images=images,
            time_s=self.steps_taken / self.fps,
            state_names=self.state_names,
            privileged=world,
        )

    def send_action(self, action: np.ndarray) -> None:
        x, y, z, closure = (float(v) for v in np.asarray(action, dtype=np.float64).reshape(-1)[:4])
        target = Gripper(
            float(np.clip(x, -0.05, TABLE_WIDTH + 0.05)),
            float(np.clip(y, -0.05, TABLE_DEPTH + 0.05)),
            float(np.clip(z, 0.0, _Z_MAX)),
            float(np.clip(closure, 0.0, 1.0)),
        )
        self.world = step(self._state(), target)
        self.steps_taken += 1

    def change_target(self, index: int, target: str, stack: bool) -> None:
        """Record that the operator changed step `index`'s target (what success is checked against)."""
        if self.episode is None or self.episode.steps is None:
            return
        steps = list(self.episode.steps)
        steps[index] = replace(steps[index], target=target, stack=stack)
        self.episode.steps = tuple(steps)

    def success(self) -> bool | None:
        """Whether every step of the task holds now (None for a task the simulator cannot check)."""
        if self.episode is None or self.episode.steps is None:
            return None
        world = self._state()
        return all(step_satisfied(world, s, self.start) for s in self.episode.steps) and world.held is None

    def close(self) -> None:
        """Nothing to release; the final state stays readable (for reports and tests)."""
