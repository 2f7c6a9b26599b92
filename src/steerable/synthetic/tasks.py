"""Task sampling for the synthetic tabletop: pick-and-place, stacking, pushing, one to four steps.

A task is a list of steps plus the instruction a person would give. A pick-and-place step (into a
receptacle, or onto another cube when `stack` is set) yields two subtasks, "pick up X" then
"place X ..."; a push step yields one, "push X <direction>", with no gripper event. Phrasings come
from `steerable.synthetic.commands`. A step may carry a `redirect`: mid-way through the placement
the person says to use another receptacle, and the expert follows (the oracle-language
interjection episodes). `parse_task` reads a task in these phrasings back into steps, and
`step_commands` says a step as the commands the scripted controller executes. `step_satisfied` and
`task_done` say whether a step, or the whole task, holds in a world state: the simulator's success
and the outcome the synthetic dataset records.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from steerable.synthetic.commands import (
    DIRECTION_WORDS,
    DIRECTIONS,
    CommandError,
    clean_text,
    pick_text,
    place_text,
    push_text,
    resolve_cube,
    resolve_target,
)
from steerable.synthetic.difficulty import EASY, Difficulty
from steerable.synthetic.world import CUBE_SIZE, TABLE_DEPTH, TABLE_WIDTH, Scene, WorldState

__all__ = [
    "PUSH_DISTANCE",
    "Step",
    "TaskSpec",
    "add_redirect",
    "parse_task",
    "push_is_clear",
    "sample_task",
    "step_commands",
    "step_satisfied",
    "task_done",
]

_SINGLE = ("put the {c} in the {t}", "place the {c} in the {t}", "move the {c} into the {t}")
_MULTI = (
    "put the {c} in the {t}, then the {c2} in the {t2}",
    "first place the {c} in the {t}, then put the {c2} in the {t2}",
)
_STACK = ("stack the {c} on the {t}", "put the {c} on top of the {t}")
# Clauses of the longer tasks (realistic/hard), joined with ", then ".
_CLAUSE = {"place": "put the {c} in the {t}", "stack": "stack the {c} on the {t}", "push": "push the {c} {t}"}
# How far a push moves the cube (metres).
PUSH_DISTANCE = 0.08


@dataclass(frozen=True)
class Step:
    """Move `cube` onto `target`: a receptacle, another cube (`stack`), or push it in the direction
    `target` (`push`). `redirect`: where an interjection switches the placement to (another
    receptacle; for a stack, another cube)."""

    cube: str
    target: str
    stack: bool = False
    push: bool = False
    redirect: str | None = None

    @property
    def pick_text(self) -> str:
        return pick_text(self.cube)

    @property
    def place_text(self) -> str:
        if self.push:
            return push_text(self.cube, self.target)
        return place_text(self.cube, self.target, self.stack)

    @property
    def final_target(self) -> str:
        """Where the cube ends up: the redirect when there is one."""
        return self.redirect or self.target

    @property
    def subtasks(self) -> tuple[str, ...]:
        """The subtask texts of this step as planned before any interjection."""
        return (self.place_text,) if self.push else (self.pick_text, self.place_text)


@dataclass(frozen=True)
class TaskSpec:
    text: str
    steps: tuple[Step, ...]


def sample_task(
    scene: Scene,
    rng: np.random.Generator,
    difficulty: Difficulty = EASY,
    positions: Sequence[tuple[float, float, float]] | None = None,
) -> TaskSpec:
    """Draw a task the scene allows. Easy: 40% one step, 35% two steps, 25% stacking.

    Other difficulties draw 1-4 steps with `difficulty.step_probs`, some of them pushes (which
    need the cubes' `positions` to find a free direction), the last one possibly a stacking.
    """
    if difficulty.step_probs is None:
        return _sample_easy(scene, rng)
    return _sample_long(scene, rng, difficulty, positions)


def _sample_easy(scene: Scene, rng: np.random.Generator) -> TaskSpec:
    cubes = [c.name for c in scene.cubes]
    targets = [r.name for r in scene.receptacles]
    kind = rng.choice(3, p=[0.4, 0.35, 0.25])
    order = rng.permutation(len(cubes))
    c, c2 = cubes[order[0]], cubes[order[1]]
    if kind == 2:
        template = _STACK[int(rng.integers(len(_STACK)))]
        return TaskSpec(template.format(c=c, t=c2), (Step(c, c2, stack=True),))
    t = targets[int(rng.integers(len(targets)))]
    if kind == 0:
        template = _SINGLE[int(rng.integers(len(_SINGLE)))]
        return TaskSpec(template.format(c=c, t=t), (Step(c, t),))
    t2 = targets[int(rng.integers(len(targets)))]
    template = _MULTI[int(rng.integers(len(_MULTI)))]
    return TaskSpec(template.format(c=c, t=t, c2=c2, t2=t2), (Step(c, t), Step(c2, t2)))


def _sample_long(
    scene: Scene,
    rng: np.random.Generator,
    difficulty: Difficulty,
    positions: Sequence[tuple[float, float, float]] | None,
) -> TaskSpec:
    cubes = [c.name for c in scene.cubes]
    targets = [r.name for r in scene.receptacles]
    probs = np.asarray(difficulty.step_probs, dtype=np.float64)
    wanted = int(rng.choice(4, p=probs / probs.sum())) + 1
    order = [cubes[i] for i in rng.permutation(len(cubes))]
    n_steps = min(wanted, len(cubes))
    steps: list[Step] = []
    for k in range(n_steps):
        cube = order[k]
        roll = float(rng.random())
        if roll < difficulty.push_rate and positions is not None:
            direction = _free_direction(scene, positions, scene.cube_index(cube), rng)
            if direction is not None:
                steps.append(Step(cube, direction, push=True))
                continue
        if k == n_steps - 1 and k + 1 < len(order) and roll > 0.8:  # the base stays unmoved
            steps.append(Step(cube, order[k + 1], stack=True))
        else:
            steps.append(Step(cube, targets[int(rng.integers(len(targets)))]))
    clauses = [
        _CLAUSE["push" if s.push else "stack" if s.stack else "place"].format(c=s.cube, t=s.target)
        for s in steps
    ]
    text = ", then ".join(clauses)
    if len(clauses) > 2 and rng.random() < 0.5:
        text = "first " + ", then ".join(clauses[:-1]) + ", and finally " + clauses[-1]
    return TaskSpec(text, tuple(steps))


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


def task_done(state: WorldState, steps: Sequence[Step], start: WorldState | None = None) -> bool:
    """Whether every step holds in `state` (each to its `final_target`) and nothing is held."""
    return state.held is None and all(
        step_satisfied(state, replace(s, target=s.final_target, redirect=None), start) for s in steps
    )


def push_is_clear(
    scene: Scene, positions: Sequence[tuple[float, float, float]], index: int, direction: str
) -> bool:
    """Whether pushing cube `index` by PUSH_DISTANCE toward `direction` keeps it on free table."""
    ux, uy = DIRECTIONS[direction]
    x, y, z = positions[index]
    if z > 0.0:
        return False
    margin = CUBE_SIZE
    for s in np.linspace(0.0, 1.0, 9):
        px, py = x + ux * PUSH_DISTANCE * s, y + uy * PUSH_DISTANCE * s
        if not (margin < px < TABLE_WIDTH - margin and margin < py < TABLE_DEPTH - margin):
            return False
        for rec in scene.receptacles:
            x0, y0, x1, y1 = rec.rect
            if x0 - margin < px < x1 + margin and y0 - margin < py < y1 + margin:
                return False
        for j, (ox, oy, _) in enumerate(positions):
            if j != index and np.hypot(px - ox, py - oy) < 2.2 * CUBE_SIZE:
                return False
    # Room behind the cube for the gripper to start from.
    bx, by = x - ux * 0.05, y - uy * 0.05
    return all(
        np.hypot(bx - ox, by - oy) > 1.5 * CUBE_SIZE for j, (ox, oy, _) in enumerate(positions) if j != index
    )


def _free_direction(
    scene: Scene, positions: Sequence[tuple[float, float, float]], index: int, rng: np.random.Generator
) -> str | None:
    names = list(DIRECTIONS)
    for i in rng.permutation(len(names)):
        if push_is_clear(scene, positions, index, names[int(i)]):
            return names[int(i)]
    return None


def add_redirect(task: TaskSpec, scene: Scene, rng: np.random.Generator) -> TaskSpec:
    """`task` with one placement redirected (same text), if any can be: a receptacle placement to
    another receptacle; in a task without one, a stack onto a cube no step involves."""
    candidates = [i for i, s in enumerate(task.steps) if not s.push and not s.stack]
    others = [r.name for r in scene.receptacles]
    if candidates and len(others) >= 2:
        i = candidates[int(rng.integers(len(candidates)))]
        choices = [name for name in others if name != task.steps[i].target]
    else:
        # Drawn only where no receptacle placement exists, so every receptacle redirect (and every
        # dataset made before stacks could be redirected) stays as it was.
        candidates = [i for i, s in enumerate(task.steps) if s.stack]
        involved = {s.cube for s in task.steps} | {s.target for s in task.steps}
        others = [c.name for c in scene.cubes if c.name not in involved]
        if not candidates or not others:
            return task
        i = candidates[int(rng.integers(len(candidates)))]
        choices = others
    new = replace(task.steps[i], redirect=choices[int(rng.integers(len(choices)))])
    return TaskSpec(task.text, task.steps[:i] + (new,) + task.steps[i + 1 :])


def step_commands(step: Step, holding: bool = False) -> list[str]:
    """The subtask commands that perform `step`, as the synthetic data's subtask rows word them (the
    cube named in the placement too, so a policy trained on that language reads the scripted
    planner's commands as it read its training data); `holding`: already picked."""
    if step.push:
        return [push_text(step.cube, step.target)]
    place = place_text(step.cube, step.target, step.stack)
    return [place] if holding else [pick_text(step.cube), place]


# "the red cube in the blue bin", and the held-out "the red cube goes/belongs in the blue bin".
_STEP = re.compile(
    r"(?:the )?(?P<cube>\w+ cube) (?:(?:goes|belongs) )?(?P<prep>in|into|on top of|on|onto) "
    r"(?:the )?(?P<target>\w+ (?:bin|zone|cube))"
)
_PUSH_STEP = re.compile(rf"(?:push|slide|nudge) (?:the )?(?P<cube>\w+ cube) (?P<direction>{DIRECTION_WORDS})\b")
# Where a task's steps part: the seen ", then" / ", and finally", and the held-out paraphrases' "and
# then", ", next", ", and last" and "; after that" (`steerable.synthetic.phrasings`).
_STEP_BREAK = re.compile(r",? (?:and )?then |, and (?:finally |last )?|, next |;")


def parse_task(text: str, scene: Scene) -> tuple[Step, ...]:
    """The steps of a task in the generator's phrasings, seen and held out; raises CommandError when none
    are found."""
    steps: list[Step] = []
    for part in _STEP_BREAK.split(clean_text(text)):
        push = _PUSH_STEP.search(part)
        if push is not None:
            steps.append(Step(resolve_cube(push.group("cube"), scene, text), push.group("direction"), push=True))
            continue
        match = _STEP.search(part)
        if match is None:
            continue
        cube = resolve_target(match.group("cube"), scene)
        target = resolve_target(match.group("target"), scene)
        if cube is None or not cube[1] or target is None:
            raise CommandError(f"task {text!r} names an object this scene does not have ({part!r})")
        steps.append(Step(cube[0], target[0], stack=target[1]))
    if not steps:
        raise CommandError(
            f"cannot read task {text!r}; say e.g. 'put the red cube in the blue bin' "
            "or 'stack the red cube on the green cube'"
        )
    return tuple(steps)
