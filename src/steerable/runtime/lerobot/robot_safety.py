"""How far a robot's targets may move in one control step, and which targets are never sent.

A learned policy can be wrong in many ways (normalised numbers where degrees were meant, a jump
across the workspace, NaN); on a robot each of those is a motion. So every target goes through a
`TargetBound` before it reaches the motors: each action feature moves at most `limit` (robot units:
degrees for an SO-101's joints, 0-100 for its gripper) from the last target sent, the first from
where the robot is (its observation of the same name). A target that is not a finite number, or an
action of the wrong size, is refused whole: nothing is sent.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from steerable.errors import CommandError, ConfigError

__all__ = ["DEFAULT_MAX_STEP", "TargetBound"]

# A target moves at most this much per control step when the robot's config sets no
# `max_relative_target`: 5 degrees per step is 75 degrees/s at 15 Hz, a brisk but careful arm.
DEFAULT_MAX_STEP = 5.0


def _limits(names: tuple[str, ...], limit: float | Mapping[str, float]) -> np.ndarray:
    """One positive limit per action feature; a mapping may name a feature or its motor (`gripper`
    for `gripper.pos`, as LeRobot's `max_relative_target` does)."""
    if isinstance(limit, Mapping):
        values = []
        for name in names:
            motor = name.removesuffix(".pos")
            if name not in limit and motor not in limit:
                raise ConfigError(f"--robot.max_relative_target names no bound for {motor} "
                                  f"(give one per motor: {', '.join(n.removesuffix('.pos') for n in names)})")
            values.append(float(limit[name] if name in limit else limit[motor]))
        out = np.array(values, dtype=np.float64)
    else:
        out = np.full(len(names), float(limit), dtype=np.float64)
    if not np.all(np.isfinite(out)) or np.any(out <= 0):
        raise ConfigError(f"--robot.max_relative_target must be positive, got {limit}")
    return out


class TargetBound:
    """Clips each target to within its limit of the last target sent (see the module docstring)."""

    def __init__(self, names: tuple[str, ...], limit: float | Mapping[str, float] = DEFAULT_MAX_STEP) -> None:
        self.names = names
        self.limit = _limits(names, limit)
        self.last: np.ndarray | None = None  # the last targets sent (None: nothing sent yet)
        self.clipped = 0  # steps on which some target was held back

    def reset(self) -> None:
        """Start again from where the robot is (a new episode, the robot moved by hand)."""
        self.last = None

    def check(self, action: np.ndarray) -> np.ndarray:
        """`action` as float64 of the right size with finite values, or a CommandError (nothing sent)."""
        values = np.asarray(action, dtype=np.float64).reshape(-1)
        if values.shape[0] != len(self.names):
            raise CommandError(f"robot: an action of {values.shape[0]} values for {len(self.names)} action features "
                               f"({', '.join(self.names)}); nothing sent")
        bad = [name for name, v in zip(self.names, values, strict=True) if not np.isfinite(v)]
        if bad:
            raise CommandError(f"robot: the target for {', '.join(bad)} is not a number; nothing sent")
        return values

    def clip(self, action: np.ndarray, present: Mapping[str, float]) -> np.ndarray:
        """The targets to send: within the limit of the last ones (the first time: of `present`, the
        robot's reading of each feature; 0 for a feature it does not report, e.g. a velocity)."""
        values = self.check(action)
        reference = self.last if self.last is not None else np.array(
            [float(present.get(name, 0.0)) for name in self.names], dtype=np.float64)
        unknown = [name for name, v in zip(self.names, reference, strict=True) if not np.isfinite(v)]
        if unknown:
            raise CommandError(f"robot: where {', '.join(unknown)} is cannot be read (not a number); nothing sent")
        out = np.clip(values, reference - self.limit, reference + self.limit)
        if np.any(out != values):
            self.clipped += 1
        return out

    def sent(self, targets: np.ndarray) -> None:
        """The targets the robot took (after its own clipping): the reference of the next step."""
        self.last = np.asarray(targets, dtype=np.float64).copy()
