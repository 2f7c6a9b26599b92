"""The scripted expert: smooth minimum-jerk pick-and-place with tracking noise and random pauses.

It plans from the live world state (where the cube is now), one motion segment at a time, and
steps the world every frame, so what it records is what the world did. The command it sends at
frame i (the pose planned for frame i+1) is the `action`; the pose reached is the `observation.state`.
Above `easy` it also behaves like a human teleoperator (see `steerable.synthetic.difficulty`):
uneven speed, hesitations, idle stretches, a reach toward the wrong cube, failed grasps and
re-grasps, corrections during placement; and it pushes cubes and follows redirects. At `hard` it
also re-grips while carrying, stops long mid-transport, nudges a released cube into place, and
chains subtasks with no pause in one smooth arc.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from steerable.synthetic.commands import DIRECTIONS, place_text
from steerable.synthetic.difficulty import EASY, Difficulty
from steerable.synthetic.tasks import PUSH_DISTANCE, Step, TaskSpec
from steerable.synthetic.world import HOME, PUSHER_RADIUS, Gripper, WorldState, step, support_height

__all__ = ["Demo", "Expert", "Redirect", "demonstrate", "place_position"]

# Offsets of successive cubes placed in one receptacle, so they do not land on each other.
_SLOT_OFFSETS = ((-0.025, -0.025), (0.025, 0.025), (0.025, -0.025), (-0.025, 0.025))
_NOISE_STD = 0.0004
_NOISE_DECAY = 0.9
_CLOSURE_NOISE = 0.004
_PUSH_GAP = 0.03  # the gripper starts this far behind the cube's face


@dataclass(frozen=True)
class Redirect:
    """A mid-placement interjection the expert obeyed: at `frame` the target became `new_target`."""

    frame: int
    cube: str
    old_target: str
    new_target: str


@dataclass
class Demo:
    """One recorded episode: per-frame world states, commands, and where each subtask starts."""

    states: list[WorldState] = field(default_factory=list)
    commands: list[np.ndarray] = field(default_factory=list)
    subtasks: list[tuple[int, str]] = field(default_factory=list)
    redirects: list[Redirect] = field(default_factory=list)

    def observations(self) -> np.ndarray:
        """(n, 4) float32: ee.x, ee.y, ee.z, gripper.closure as reached."""
        return np.array([s.gripper.as_array() for s in self.states], dtype=np.float32)

    def actions(self) -> np.ndarray:
        """(n, 4) float32: the pose commanded for the next frame (the last frame repeats its own)."""
        nxt = self.commands[1:] + self.commands[-1:]
        return np.array(nxt, dtype=np.float32)


def _min_jerk(s: np.ndarray) -> np.ndarray:
    return 10 * s**3 - 15 * s**4 + 6 * s**5


def place_position(state: WorldState, target: Step, exclude: int | None = None) -> tuple[float, float]:
    """Where `target.cube` goes: on the other cube, or the next free slot of the receptacle, counting
    the cubes inside it but cube `exclude` (the scripted controller leaves out the cube it places, so
    the slot stays put while that cube arrives; the expert picks its slot once, counting every cube)."""
    scene = state.scene
    if target.stack:
        x, y, _ = state.positions[scene.cube_index(target.target)]
        return (x, y)
    rec = scene.receptacle(target.target)
    x0, y0, x1, y1 = rec.rect
    inside = sum(
        1 for i, (px, py, _) in enumerate(state.positions) if i != exclude and x0 <= px <= x1 and y0 <= py <= y1
    )
    dx, dy = _SLOT_OFFSETS[inside % len(_SLOT_OFFSETS)]
    cx, cy = rec.center
    return (cx + dx, cy + dy)


class Expert:
    """Drives the world through motion segments and records every frame."""

    def __init__(
        self, state: WorldState, rng: np.random.Generator, fps: int, difficulty: Difficulty = EASY
    ) -> None:
        self.rng = rng
        self.fps = fps
        self.difficulty = difficulty
        self.travel_z = float(rng.uniform(0.10, 0.14))
        self.speed = float(rng.uniform(0.2, 0.3))
        start = HOME.as_array() + np.array([*rng.uniform(-0.03, 0.03, size=2), 0.0, 0.0])
        self.plan = start
        self.noise = np.zeros(3)
        self.demo = Demo()
        self.state = state
        self._arc_next = False  # the next move is one smooth arc (a chained subtask boundary)
        self._record(start)

    @property
    def frame(self) -> int:
        return len(self.demo.states)

    def _chance(self, rate: float) -> bool:
        # No draw at all when a nuisance is off, so `easy` consumes the generator as it always did.
        return rate > 0 and float(self.rng.random()) < rate

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

    def _arc(self, target: np.ndarray, seconds: float) -> None:
        """Rise early and travel at once: z reaches its target in the first 40 % of the move."""
        n = max(1, int(round(seconds * self.fps)))
        start = self.plan
        s = np.arange(1, n + 1) / n
        sxy, sz = _min_jerk(s), _min_jerk(np.minimum(1.0, s / 0.4))
        for a, b in zip(sxy, sz, strict=True):
            point = start + (target - start) * a
            point[2] = start[2] + (target[2] - start[2]) * b
            self._record(point)
        self.plan = target

    def move(self, x: float, y: float, z: float, seconds: float | None = None) -> None:
        target = np.array([x, y, z, self.plan[3]])
        if seconds is None:
            seconds = float(np.linalg.norm(target[:3] - self.plan[:3])) / self.speed + 0.4
        if self.difficulty.speed_sigma > 0:
            seconds *= float(np.exp(self.rng.normal(0.0, self.difficulty.speed_sigma)))
        if self._arc_next:
            self._arc_next = False
            self._arc(target, seconds)
            return
        if self._chance(self.difficulty.hesitation_rate):
            # Stop part way, as an operator does when unsure, then go on.
            f = float(self.rng.uniform(0.3, 0.7))
            self._segment(self.plan + (target - self.plan) * f, seconds * f)
            self.hold(float(self.rng.uniform(0.3, 1.0)))
            seconds *= 1 - f
        self._segment(target, seconds)

    def grip(self, closure: float) -> None:
        self._segment(np.array([*self.plan[:3], closure]), 0.4)

    def hold(self, seconds: float) -> None:
        self._segment(self.plan.copy(), seconds)

    def maybe_pause(self) -> None:
        if self.rng.random() < 0.35:
            self.hold(float(self.rng.uniform(0.4, 1.2)))

    def maybe_idle(self) -> None:
        if self._chance(self.difficulty.idle_rate):
            self.hold(float(self.rng.uniform(*self.difficulty.idle_seconds)))

    def _descent(self) -> float:
        return float(self.rng.uniform(0.45, 0.6))

    def chain(self) -> bool:
        """Whether the coming subtask boundary is chained (no lift and pause first, one smooth arc)."""
        return self._chance(self.difficulty.chain_rate)

    def pick(self, cube: str, chain: bool = False) -> None:
        i = self.state.scene.cube_index(cube)
        if self._chance(self.difficulty.wrong_reach_rate):
            self._wrong_reach(i)
        x, y, z = self.state.positions[i]
        size = self.state.scene.cubes[i].size
        self.move(x, y, self.travel_z)
        if self._chance(self.difficulty.failed_grasp_rate):
            # Close beside the cube (further than the fingers can catch), notice, open, re-align.
            angle = float(self.rng.uniform(0, 2 * np.pi))
            miss = float(self.rng.uniform(0.02, 0.028))
            mx, my = x + miss * np.cos(angle), y + miss * np.sin(angle)
            self.move(mx, my, self.travel_z, 0.3)
            self.move(mx, my, z + size / 2, self._descent())
            self.grip(1.0)
            self.hold(float(self.rng.uniform(0.2, 0.6)))
            self.grip(0.0)
            self.move(mx, my, z + size + 0.03, 0.5)
            self.move(x, y, z + size + 0.03, 0.5)
            self.move(x, y, z + size / 2, 0.5)
        else:
            self.move(x, y, z + size / 2, self._descent())
        self.grip(1.0)
        if chain:
            self._arc_next = True  # the place starts at once, lifting on the way
            return
        self.move(x, y, self.travel_z, self._descent())
        self.maybe_pause()

    def _wrong_reach(self, cube: int) -> None:
        others = [j for j in range(len(self.state.positions)) if j != cube]
        if not others:
            return
        ox, oy, _ = self.state.positions[others[int(self.rng.integers(len(others)))]]
        f = float(self.rng.uniform(0.4, 0.8))
        px, py = self.plan[0] + (ox - self.plan[0]) * f, self.plan[1] + (oy - self.plan[1]) * f
        self.move(float(px), float(py), self.travel_z)
        self.hold(float(self.rng.uniform(0.2, 0.6)))

    def place(self, target: Step, chain: bool = False) -> None:
        x, y = place_position(self.state, target)
        size = self.state.scene.cubes[self.state.scene.cube_index(target.cube)].size
        if target.redirect is not None:
            x, y = self._redirected(target, target.redirect, x, y)
        else:
            self._interrupted_transport(x, y)
        self.move(x, y, self.travel_z)
        self.maybe_pause()
        bottom = support_height(self.state, x, y, exclude=self.state.held)
        if self._chance(self.difficulty.correction_rate):
            # Lower toward a slightly wrong spot, stop, shift over, then lower the rest of the way.
            angle = float(self.rng.uniform(0, 2 * np.pi))
            off = float(self.rng.uniform(0.015, 0.03))
            wx, wy = x + off * np.cos(angle), y + off * np.sin(angle)
            self.move(wx, wy, self.travel_z, 0.3)
            self.move(wx, wy, bottom + size + float(self.rng.uniform(0.02, 0.04)), self._descent())
            self.hold(float(self.rng.uniform(0.2, 0.5)))
            self.move(x, y, self.plan[2], 0.5)
        nudge = not target.stack and self._chance(self.difficulty.nudge_rate)
        rx, ry = x, y
        if nudge:
            angle = float(self.rng.uniform(0, 2 * np.pi))
            off = float(self.rng.uniform(0.008, 0.015))
            rx, ry = x + off * np.cos(angle), y + off * np.sin(angle)
        self.move(rx, ry, bottom + size / 2 + 0.002, self._descent())
        self.grip(0.0)
        if nudge:
            # Released off the spot: look, grasp it again, slide it over, let go.
            self.hold(float(self.rng.uniform(0.2, 0.5)))
            self.grip(1.0)
            self.move(x, y, self.plan[2], float(self.rng.uniform(0.5, 0.8)))
            self.grip(0.0)
        if chain:
            self._arc_next = True  # the next subtask starts at once, lifting on the way
            return
        self.move(x, y, self.travel_z, self._descent())

    def _interrupted_transport(self, x: float, y: float) -> None:
        """On the way to (x, y): maybe loosen the grip and close it again, maybe stop a long while."""
        regrip = self._chance(self.difficulty.regrip_rate)
        pause = self._chance(self.difficulty.transport_pause_rate)
        if not (regrip or pause):
            return
        f = float(self.rng.uniform(0.3, 0.7))
        self.move(self.plan[0] + (x - self.plan[0]) * f, self.plan[1] + (y - self.plan[1]) * f, self.travel_z)
        if regrip:  # still above the grasp threshold: the cube stays held
            self._segment(np.array([*self.plan[:3], float(self.rng.uniform(0.55, 0.7))]), 0.3)
            self.hold(float(self.rng.uniform(0.1, 0.4)))
            self._segment(np.array([*self.plan[:3], 1.0]), 0.3)
        if pause:
            self.hold(float(self.rng.uniform(*self.difficulty.transport_pause_seconds)))

    def _redirected(self, target: Step, new_target: str, x: float, y: float) -> tuple[float, float]:
        """Head for the original target; part way the person redirects, the expert turns (to another
        receptacle, or for a stack to another cube)."""
        f = float(self.rng.uniform(0.4, 0.75))
        self._segment(
            np.array(
                [
                    self.plan[0] + (x - self.plan[0]) * f,
                    self.plan[1] + (y - self.plan[1]) * f,
                    self.travel_z,
                    self.plan[3],
                ]
            ),
            float(self.rng.uniform(0.6, 1.0)),
        )
        self.demo.redirects.append(Redirect(self.frame, target.cube, target.target, new_target))
        self.demo.subtasks.append((self.frame, place_text(target.cube, new_target, target.stack)))
        self.hold(float(self.rng.uniform(0.3, 0.7)))  # hearing it and reacting
        return place_position(self.state, Step(target.cube, new_target, stack=target.stack))

    def push(self, target: Step) -> None:
        i = self.state.scene.cube_index(target.cube)
        x, y, z = self.state.positions[i]
        size = self.state.scene.cubes[i].size
        ux, uy = DIRECTIONS[target.target]
        back = size / 2 + _PUSH_GAP
        sx, sy = x - ux * back, y - uy * back
        self.move(sx, sy, self.travel_z)
        self.move(sx, sy, z + size / 2, self._descent())
        travel = PUSH_DISTANCE + _PUSH_GAP - PUSHER_RADIUS
        # The stroke itself is steady (no speed draw): a slow, even push keeps the cube ahead of the gripper.
        self._segment(
            np.array([sx + ux * travel, sy + uy * travel, z + size / 2, self.plan[3]]),
            float(self.rng.uniform(1.0, 1.5)),
        )
        self.move(self.plan[0], self.plan[1], self.travel_z, self._descent())


def demonstrate(
    state: WorldState, task: TaskSpec, rng: np.random.Generator, fps: int, difficulty: Difficulty = EASY
) -> Demo:
    """Perform `task` from `state`; subtask starts are frame indices, the first one is frame 0."""
    expert = Expert(state, rng, fps, difficulty)
    expert.hold(float(rng.uniform(0.3, 0.8)))
    chained = False  # the previous place ended in a chained boundary: no idle stretch
    for n, step_ in enumerate(task.steps):
        if expert.demo.subtasks and not chained:
            expert.maybe_idle()  # the tail of the previous subtask: nothing new has started yet
        start = expert.frame if expert.demo.subtasks else 0
        if step_.push:
            expert.demo.subtasks.append((start, step_.place_text))
            expert.push(step_)
            chained = False
            continue
        expert.demo.subtasks.append((start, step_.pick_text))
        expert.pick(step_.cube, chain=step_.redirect is None and expert.chain())
        expert.demo.subtasks.append((expert.frame, step_.place_text))
        chained = n + 1 < len(task.steps) and expert.chain()
        expert.place(step_, chain=chained)
    expert.hold(float(rng.uniform(0.3, 0.7)))
    return expert.demo
