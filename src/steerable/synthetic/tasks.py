"""Task sampling for the synthetic tabletop: single pick-and-place, two-step, and stacking.

A task is a list of steps (move one cube onto a receptacle or onto another cube) plus the
instruction a person would give; each step yields two subtasks, "pick up X" then "place X ...".
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from steerable.synthetic.world import Scene

__all__ = ["Step", "TaskSpec", "sample_task"]

_SINGLE = ("put the {c} in the {t}", "place the {c} in the {t}", "move the {c} into the {t}")
_MULTI = (
    "put the {c} in the {t}, then the {c2} in the {t2}",
    "first place the {c} in the {t}, then put the {c2} in the {t2}",
)
_STACK = ("stack the {c} on the {t}", "put the {c} on top of the {t}")


@dataclass(frozen=True)
class Step:
    """Move `cube` onto `target`: a receptacle name, or another cube's name when `stack` is set."""

    cube: str
    target: str
    stack: bool = False

    @property
    def pick_text(self) -> str:
        return f"pick up the {self.cube}"

    @property
    def place_text(self) -> str:
        return f"place the {self.cube} {'on' if self.stack else 'in'} the {self.target}"


@dataclass(frozen=True)
class TaskSpec:
    text: str
    steps: tuple[Step, ...]


def sample_task(scene: Scene, rng: np.random.Generator) -> TaskSpec:
    """Draw a task the scene allows: 40% one step, 35% two steps, 25% stacking."""
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
