"""The scripted expert: smooth minimum-jerk pick-and-place with tracking noise and random pauses.

It plans from the live world state (where the cube is now), one motion segment at a time, and
steps the world every frame, so what it records is what the world did. The command it sends at
frame i (the pose planned for frame i+1) is the `action`; the pose reached is the `observation.state`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from steerable.synthetic.tasks import Step, TaskSpec
from steerable.synthetic.world import HOME, Gripper, WorldState, step, support_height

__all__ = ["Demo", "Expert", "demonstrate", "place_position"]

# Offsets of successive cubes placed in one receptacle, so they do not land on each other.
_SLOT_OFFSETS = ((-0.025, -0.025), (0.025, 0.025), (0.025, -0.025), (-0.025, 0.025))
_NOISE_STD = 0.0004
_NOISE_DECAY = 0.9
_CLOSURE_NOISE = 0.004


@dataclass
class Demo:
    """One recorded episode: per-frame world states, commands, and where each subtask starts."""

    states: list[WorldState] = field(default_factory=list)
    commands: list[np.ndarray] = field(default_factory=list)
    subtasks: list[tuple[int, str]] = field(default_factory=list)

    def observations(self) -> np.ndarray:
        """(n, 4) float32: ee.x, ee.y, ee.z, gripper.closure as reached."""
        return np.array([s.gripper.as_array() for s in self.states], dtype=np.float32)

    def actions(self) -> np.ndarray:
        """(n, 4) float32: the pose commanded for the next frame (the last frame repeats its own)."""
        nxt = self.commands[1:] + self.commands[-1:]
        return np.array(nxt, dtype=np.float32)


def _min_jerk(s: np.ndarray) -> np.ndarray:
    return 10 * s**3 - 15 * s**4 + 6 * s**5


def place_position(state: WorldState, target: Step) -> tuple[float, float]:
    """Where the expert puts `target.cube`: on the other cube, or a free slot of the receptacle."""
    scene = state.scene
    if target.stack:
        x, y, _ = state.positions[scene.cube_index(target.target)]
        return (x, y)
    rec = scene.receptacle(target.target)
    x0, y0, x1, y1 = rec.rect
    inside = sum(1 for px, py, _ in state.positions if x0 <= px <= x1 and y0 <= py <= y1)
    dx, dy = _SLOT_OFFSETS[inside % len(_SLOT_OFFSETS)]
    cx, cy = rec.center
    return (cx + dx, cy + dy)


class Expert:
    """Drives the world through motion segments and records every frame."""

    def __init__(self, state: WorldState, rng: np.random.Generator, fps: int) -> None:
        self.rng = rng
        self.fps = fps
        self.travel_z = float(rng.uniform(0.10, 0.14))
        self.speed = float(rng.uniform(0.2, 0.3))
        start = HOME.as_array() + np.array([*rng.uniform(-0.03, 0.03, size=2), 0.0, 0.0])
        self.plan = start
        self.noise = np.zeros(3)
        self.demo = Demo()
        self.state = state
        self._record(start)

    @property
    def frame(self) -> int:
        return len(self.demo.states)

    def _record(self, plan: np.ndarray) -> None:
        self.noise = _NOISE_DECAY * self.noise + self.rng.normal(0.0, _NOISE_STD, size=3)
        x, y, z = plan[:3] + self.noise
        closure = float(np.clip(plan[3] + self.rng.uniform(-_CLOSURE_NOISE, _CLOSURE_NOISE), 0.0, 1.0))
        self.state = step(self.state, Gripper(float(x), float(y), float(max(z, 0.0)), closure))
        self.demo.states.append(self.state)
        self.demo.commands.append(plan.copy())

    def _segment(self, target: np.ndarray, seconds: float) -> None:
        n = max(1, int(round(seconds * self.fps)))
        start = self.plan
        for s in _min_jerk(np.arange(1, n + 1) / n):
            self._record(start + (target - start) * s)
        self.plan = target

    def move(self, x: float, y: float, z: float, seconds: float | None = None) -> None:
        target = np.array([x, y, z, self.plan[3]])
        if seconds is None:
            seconds = float(np.linalg.norm(target[:3] - self.plan[:3])) / self.speed + 0.4
        self._segment(target, seconds)

    def grip(self, closure: float) -> None:
        self._segment(np.array([*self.plan[:3], closure]), 0.4)

    def hold(self, seconds: float) -> None:
        self._segment(self.plan.copy(), seconds)

    def maybe_pause(self) -> None:
        if self.rng.random() < 0.35:
            self.hold(float(self.rng.uniform(0.4, 1.2)))

    def pick(self, cube: str) -> None:
        i = self.state.scene.cube_index(cube)
        x, y, z = self.state.positions[i]
        size = self.state.scene.cubes[i].size
        self.move(x, y, self.travel_z)
        self.move(x, y, z + size / 2, float(self.rng.uniform(0.45, 0.6)))
        self.grip(1.0)
        self.move(x, y, self.travel_z, float(self.rng.uniform(0.45, 0.6)))
        self.maybe_pause()

    def place(self, target: Step) -> None:
        x, y = place_position(self.state, target)
        size = self.state.scene.cubes[self.state.scene.cube_index(target.cube)].size
        self.move(x, y, self.travel_z)
        self.maybe_pause()
        bottom = support_height(self.state, x, y, exclude=self.state.held)
        self.move(x, y, bottom + size / 2 + 0.002, float(self.rng.uniform(0.45, 0.6)))
        self.grip(0.0)
        self.move(x, y, self.travel_z, float(self.rng.uniform(0.45, 0.6)))


def demonstrate(state: WorldState, task: TaskSpec, rng: np.random.Generator, fps: int) -> Demo:
    """Perform `task` from `state`; subtask starts are frame indices, the first one is frame 0."""
    expert = Expert(state, rng, fps)
    expert.hold(float(rng.uniform(0.3, 0.8)))
    for step_ in task.steps:
        expert.demo.subtasks.append((expert.frame if expert.demo.subtasks else 0, step_.pick_text))
        expert.pick(step_.cube)
        expert.demo.subtasks.append((expert.frame, step_.place_text))
        expert.place(step_)
    expert.hold(float(rng.uniform(0.3, 0.7)))
    return expert.demo
