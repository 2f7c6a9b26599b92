"""Find a scene that fits a task: the first seed whose scene has every object the task names."""

from __future__ import annotations

import numpy as np

from steerable.runtime.sim.grammar import CommandError, parse_task
from steerable.synthetic.world import sample_world

__all__ = ["seed_for_task"]


def seed_for_task(task: str | None, *, tries: int = 2000) -> int:
    """The first seed (same scenes as `SimEnv.reset`) where `task` names existing objects; 0 if none."""
    if not task:
        return 0
    for seed in range(tries):
        world = sample_world(np.random.default_rng([seed, 7]))
        try:
            parse_task(task, world.scene)
        except CommandError:
            continue
        return seed
    return 0
