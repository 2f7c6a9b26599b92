"""The step check's counter-examples: a state whose moved object stands beside its target.

`PolicyDataset` shows one in `CHECK_STRIDE` of the frames that teach "done" again with the object a
placement moved put on the table beside where it should be, labelled "did not take" for the step
check (docs/policy.md, "Checking a step"). The copies train neither the actions nor the done output.
"""

from __future__ import annotations

import numpy as np
import torch

from steerable.policy.config import PolicyConfig
from steerable.policy.objects import ObjectLayout, command_objects

__all__ = ["CHECK_STRIDE", "moved_away"]

# One counter-example of the step check per this many frames that teach "done" (`PolicyDataset`).
CHECK_STRIDE = 6


def moved_away(state: torch.Tensor, command: str, cfg: PolicyConfig, layout: ObjectLayout | None,
               rng: np.random.Generator) -> torch.Tensor:
    """`state` with the object `command` moves put beside its target instead of on or in it: at a
    Chebyshev distance from the target's centre between the clearance (`cfg.check_clearance`, else
    the object description's) and the description's `check_band` more (half the clearance for a
    target with a height, a cube to stack on), resting at the description's `rest_height`. The end
    effector moves with it: a placement that missed lets go over the spot it missed, so the gripper
    stands over the object in a failure as in a success. Left above the target, it told the two
    apart by itself, and the check learnt that instead of where the object is: it passed real misses
    (a cube 7 cm from its bin) with p 0.97."""
    found = command_objects(command, layout)
    if found is None or layout is None:
        return state
    moved, target = found
    scales = layout.scales
    tx, ty = (float(state[k]) for k in target.axes[:2] if k is not None)
    near = (cfg.check_clearance or scales.check_clearance) / (2 if target.axes[2] is not None else 1)
    reach = float(rng.uniform(near, near + scales.check_band))
    side = int(rng.integers(4))  # which side of the square of that half width, and where along it
    along = float(rng.uniform(-reach, reach))
    dx, dy = [(reach, along), (-reach, along), (along, reach), (along, -reach)][side]
    out = state.clone()
    x, y, z = moved.axes
    assert x is not None and y is not None
    out[x], out[y] = tx + dx, ty + dy
    if z is not None:
        out[z] = scales.rest_height
    ee = layout.end_effector
    if ee is not None:
        out[ee[0]] += out[x] - state[x]
        out[ee[1]] += out[y] - state[y]
    return out
