"""The synthetic tabletop as an environment: reset with a seed and a task, step, render, check success.

Actions and states are what the synthetic dataset stores: `ee.x, ee.y, ee.z, gripper.closure`
(an absolute gripper pose target per step, metres in the table frame, closure 0 open .. 1 closed).
One `send_action` is one world step at `fps`. Scenes are drawn from the seed like the synthetic
dataset's, and a task, when none is given, at a `difficulty` (easy: 1-2 steps and stacking;
realistic / hard: up to four steps, pushes among them); `reset_to_recorded` rebuilds a dataset
episode's own scene and task (what `steerable run --replay` replays its actions from). Both
cameras render 224x160 by default (`camera_shapes="legacy"`: the wrist camera 128x128, as older
synthetic datasets).

For evaluation the env also plans an operator's correction (`TakesInterjections`): the first
pick-and-place step gets a new target while the robot carries its cube there (once the cube has
travelled `CARRY_BEFORE_INTERJECTING` from where it was picked up), in one of the phrasings of the
synthetic data's interjections, and success is then checked against the corrected target.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from steerable.control import (
    EpisodeSpec,
    HighLevelModel,
    LowLevelController,
    Observation,
    ScriptsController,
    ScriptsPlanner,
    SeedsForTask,
)
from steerable.errors import ConfigError
from steerable.synthetic.commands import CommandError, side_of
from steerable.synthetic.difficulty import get_difficulty
from steerable.synthetic.generate import ROBOT_TYPE, STATE_NAMES, camera_key, recorded_scene
from steerable.synthetic.locations import describe_location
from steerable.synthetic.phrasings import check_phrasings, held_out_task, interjection_phrases
from steerable.synthetic.privileged import environment_state
from steerable.synthetic.recorded_truth import SimGroundTruth
from steerable.synthetic.render import CAMERAS, DEFAULT_CAMERA_SHAPES, camera_sizes, render_frame
from steerable.synthetic.tasks import Step, parse_task, sample_task, task_done
from steerable.synthetic.world import (
    TABLE_DEPTH,
    TABLE_WIDTH,
    Gripper,
    WorldState,
    sample_world,
    step,
)

__all__ = [
    "CARRY_BEFORE_INTERJECTING",
    "SimEnv",
    "SimEpisode",
    "describe_location",
    "plan_interjection",
    "seed_for_task",
    "task_kind",
]

_Z_MAX = 0.25
# How far (metres, on the table) the held cube travels before the operator corrects its target.
CARRY_BEFORE_INTERJECTING = 0.05


def task_kind(steps: tuple[Step, ...]) -> str:
    if any(s.push for s in steps):
        return "push"
    if any(s.stack for s in steps):
        return "stack"
    return "single" if len(steps) == 1 else f"{len(steps)}-step"


def _scene_rng(seed: int) -> np.random.Generator:
    return np.random.default_rng([seed, 7])


def seed_for_task(task: str | None, *, tries: int = 2000) -> int:
    """The first seed (same scenes as `SimEnv.reset`) where `task` names existing objects; 0 if none."""
    if not task:
        return 0
    for seed in range(tries):
        world = sample_world(_scene_rng(seed))
        try:
            parse_task(task, world.scene)
        except CommandError:
            continue
        return seed
    return 0


def plan_interjection(
    world: WorldState, steps: Sequence[Step], seed: int = 0, phrasings: str = "seen"
) -> tuple[int, str, str, bool] | None:
    """(step index, what the operator says, new target, stack) for a target change, or None if none fits.

    The first step that is not a push is corrected: a placement to another receptacle, a stacking
    onto an uninvolved cube, each phrased as one of the synthetic data's interjections (drawn by `seed`),
    or with `phrasings="unseen"` as one of the held-out ones (`steerable.synthetic.phrasings`).
    """
    index = next((i for i, s in enumerate(steps) if not s.push), None)
    if index is None:
        return None
    step_ = steps[index]
    involved = {s.cube for s in steps} | {s.target for s in steps if not s.push}
    if step_.stack:
        others = [c.name for c in world.scene.cubes if c.name not in involved]
        if not others:
            return None
        stack_phrases = interjection_phrases(True, phrasings)
        stack_phrase = stack_phrases[seed % len(stack_phrases)]
        return index, stack_phrase.format(cube=step_.cube, old=step_.target, new=others[0]), others[0], True
    others = [r.name for r in world.scene.receptacles if r.name != step_.target]
    if not others:
        return None
    phrases = interjection_phrases(False, phrasings)
    phrase = phrases[seed % len(phrases)]
    return index, phrase.format(cube=step_.cube, old=step_.target, new=others[0]), others[0], False


@dataclass(frozen=True)
class SimEpisode(EpisodeSpec):
    """What `SimEnv.reset` started: the task, its kind, and its steps (empty for a free-form task)."""

    steps: tuple[Step, ...] = ()


@dataclass
class _Episode:
    seed: int
    task: str
    steps: tuple[Step, ...] | None
    interjection: tuple[int, str, str, bool] | None = None  # armed by plan_interjection
    picked_at: tuple[float, float] | None = None  # where the cube to correct was picked up



def _clamp(value: float, low: float, high: float) -> float:
    """`value` within [low, high] (a NaN stays NaN, as np.clip leaves it)."""
    return min(max(value, low), high)

class SimEnv(SimGroundTruth, ScriptsPlanner, ScriptsController, SeedsForTask):
    """The simulated tabletop; `privileged` observations carry the `WorldState` for scripted doubles."""

    robot_type: str = ROBOT_TYPE
    state_names: tuple[str, ...] = tuple(STATE_NAMES)
    action_names: tuple[str, ...] = tuple(STATE_NAMES)
    seed_for_task = staticmethod(seed_for_task)  # the session's default seed for a --task

    def __init__(
        self,
        *,
        fps: int = 15,
        cameras: tuple[str, ...] = ("top", "wrist"),
        camera_shapes: str = DEFAULT_CAMERA_SHAPES,
        difficulty: str = "easy",
        phrasings: str = "seen",
    ) -> None:
        """`cameras`: top and/or wrist; `camera_shapes`: "equal" (both 224x160) or "legacy" (the wrist
        camera 128x128); `difficulty`: the mix `reset` draws tasks from (easy, realistic, hard);
        `phrasings`: how drawn tasks and planned interjections are worded, "seen" (as the synthetic
        datasets) or "unseen" (the held-out paraphrases of `steerable.synthetic.phrasings`)."""
        unknown = [c for c in cameras if c not in CAMERAS]
        if unknown:
            raise ConfigError(f"unknown camera(s) {unknown}: the simulator has {', '.join(CAMERAS)}")
        self.fps = fps
        self.cameras = tuple(cameras)
        self.camera_keys = tuple(camera_key(c) for c in cameras)
        self.sizes = camera_sizes(camera_shapes)
        self.difficulty = get_difficulty(difficulty).name
        self.phrasings = check_phrasings(phrasings)
        self.world: WorldState | None = None
        self.start: WorldState | None = None  # the scene as reset (push steps are measured from it)
        self.episode: _Episode | None = None
        self.steps_taken = 0

    def camera_shapes(self) -> dict[str, tuple[int, int, int]]:
        return {camera_key(c): (self.sizes[c][1], self.sizes[c][0], 3) for c in self.cameras}

    def reset(self, seed: int, task: str | None = None, *, difficulty: str | None = None) -> SimEpisode:
        """A new scene from `seed`; `task` (text) or, when None, one drawn like the synthetic dataset's
        at `difficulty` (default: the env's), worded in the env's `phrasings`."""
        rng = _scene_rng(seed)
        self.world = sample_world(rng)
        self.start = self.world
        level = get_difficulty(difficulty or self.difficulty)
        drawn = sample_task(self.world.scene, rng, level, self.world.positions)
        text = task if task is not None else drawn.text
        if task is None and self.phrasings == "unseen":  # the same steps, worded apart (own stream)
            text = held_out_task(drawn.steps, np.random.default_rng([seed, 7, 1]))
        try:
            steps: tuple[Step, ...] | None = parse_task(text, self.world.scene)
        except CommandError:
            steps = None  # a free-form task: success cannot be checked
        self.episode = _Episode(seed, text, steps)
        self.steps_taken = 0
        return SimEpisode(text, task_kind(steps) if steps else "free-form", steps or ())

    def reset_to_recorded(self, seed: int, episode_index: int, difficulty: str = "easy") -> SimEpisode:
        """Episode `episode_index` of the synthetic dataset made with `seed` at `difficulty`: its initial
        scene exactly as the generator drew it, with its task (a redirect is the caller's `change_target`).

        The gripper starts at home, open, as after `reset`; the dataset's first frame has already
        moved it to where the expert starts (its first action goes there).
        """
        world, task = recorded_scene(seed, episode_index, difficulty)
        self.world = self.start = world
        self.episode = _Episode(seed, task.text, task.steps)
        self.steps_taken = 0
        return SimEpisode(task.text, task_kind(task.steps), task.steps)

    def _state(self) -> WorldState:
        if self.world is None:
            raise RuntimeError("call reset() before using the simulator")
        return self.world

    def observe(self, *, render: bool = True) -> Observation:
        world = self._state()
        images = {camera_key(c): render_frame(world, c, self.sizes[c]) for c in self.cameras} if render else {}
        return Observation(
            state=np.array(world.gripper.as_tuple(), dtype=np.float32),
            images=images,
            time_s=self.steps_taken / self.fps,
            state_names=self.state_names,
            privileged=world,
            environment_state=environment_state(world),
        )

    def send_action(self, action: np.ndarray) -> None:
        x, y, z, closure = np.asarray(action, dtype=np.float64).reshape(-1)[:4].tolist()
        target = Gripper(  # plain min/max: np.clip on one float costs more than the rest of a step
            _clamp(x, -0.05, TABLE_WIDTH + 0.05),
            _clamp(y, -0.05, TABLE_DEPTH + 0.05),
            _clamp(z, 0.0, _Z_MAX),
            _clamp(closure, 0.0, 1.0),
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
        return task_done(self._state(), self.episode.steps, self.start)

    def close(self) -> None:
        """Nothing to release; the final state stays readable (for reports and tests)."""

    # -- the test doubles of `--high_level scripted` / `--low_level scripted` --------------------------
    def scripted_planner(self) -> HighLevelModel:
        from steerable.synthetic.planner import ScriptedPlanner

        return ScriptedPlanner()

    def scripted_controller(self) -> LowLevelController:
        from steerable.synthetic.controller import ScriptedController

        return ScriptedController(self.fps)

    # -- DescribesScene ---------------------------------------------------------------------------
    def describe_scene(self) -> str:
        scene = self._state().scene
        cubes = ", ".join(c.name for c in scene.cubes)
        places = ", ".join(f"{r.name} ({side_of(r)})" for r in scene.receptacles)
        return f"cubes: {cubes}; receptacles: {places}"

    def final_report(self, task: str) -> str:
        """Where each cube `task` names ended up (every cube when it names none)."""
        world = self._state()
        text = task.lower()
        named = [c.name for c in world.scene.cubes if c.name in text] or [c.name for c in world.scene.cubes]
        return " ".join(describe_location(world, c) for c in named)

    # -- TakesInterjections ---------------------------------------------------------------------------
    def plan_interjection(self, seed: int) -> str | None:
        episode = self.episode
        if episode is None or not episode.steps:
            return None
        episode.interjection = plan_interjection(self._state(), episode.steps, seed, self.phrasings)
        episode.picked_at = None
        return episode.interjection[1] if episode.interjection is not None else None

    def interjection_due(self) -> bool:
        """Due once the cube to correct has travelled CARRY_BEFORE_INTERJECTING in the gripper."""
        episode, world = self.episode, self._state()
        if episode is None or episode.interjection is None or episode.steps is None:
            return False
        cube = world.scene.cube_index(episode.steps[episode.interjection[0]].cube)
        x, y, _ = world.positions[cube]
        if world.held != cube:
            episode.picked_at = None
        elif episode.picked_at is None:
            episode.picked_at = (x, y)
        else:
            return math.hypot(x - episode.picked_at[0], y - episode.picked_at[1]) >= CARRY_BEFORE_INTERJECTING
        return False

    def apply_interjection(self) -> None:
        if self.episode is None or self.episode.interjection is None:
            return
        index, _, target, stack = self.episode.interjection
        self.episode.interjection = None
        self.change_target(index, target, stack)
