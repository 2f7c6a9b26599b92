"""The motion library's parameters: plain values, no settings framework (and no numpy).

The annotation module's `MotionConfig` (the `--motion.*` flags) maps onto `MotionParams` with
`MotionConfig.params()`; each field carries the name of its flag, which the library's errors and
notes cite (docs/motion.md §7).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["DimRef", "Granularity", "MotionParams", "PositionKind"]

DimRef = str | int
"""A dimension of a vector feature, by name or by index."""
Granularity = Literal["coarse", "fine"]
PositionKind = Literal["auto", "cartesian", "joint"]


@dataclass(frozen=True)
class MotionParams:
    """Which dimensions to read and the thresholds of the keystate, primitive and subtask detectors.

    Every time is in seconds and every ratio is relative to the episode itself, so one value works
    across robots whose state is in metres, radians, degrees or normalised motor units. Values are
    taken as given: range checks are the caller's (`MotionConfig` validates the flags).
    """

    state_key: str | None = None
    """Vector feature to read; None tries observation.state, state, then the action, then any float vector."""
    action_key: str | None = None
    """Feature used when no state feature exists; None tries action, actions."""
    gripper_dims: tuple[DimRef, ...] | None = None
    """Gripper dimensions of the feature; None finds them by name, () means none."""
    position_dims: tuple[DimRef, ...] | None = None
    """End-effector (x, y, z in that order) or joint dimensions; None finds them by name."""
    position_kind: PositionKind = "auto"
    """How to describe motion; auto is cartesian when the position names end in x/y/z."""
    gripper_closed_is_high: bool | None = None
    """True when a larger gripper value means more closed; None decides from the name."""
    flip_x: bool = False
    """Swap forward/back: by default +x is forward."""
    flip_y: bool = False
    """Swap left/right: by default +y is left."""
    flip_z: bool = False
    """Swap up/down: by default +z is up."""
    smoothing_s: float = 0.2
    """Width of the moving average applied to every signal before detection."""
    gripper_hysteresis: float = 0.3
    """Swing, as a fraction of the gripper range, that turns an opening into a closing or back."""
    pause_speed_ratio: float = 0.15
    """A pause is slower than this fraction of the episode's 90th-percentile speed."""
    pause_speed: float | None = None
    """Absolute pause speed (position units per second); overrides pause_speed_ratio."""
    min_pause_s: float = 0.0
    """Shortest stillness reported as a pause keystate."""
    min_primitive_s: float = 0.4
    """Shortest motion primitive kept; shorter ones merge into a neighbour (gripper events excepted)."""
    direction_ratio: float = 0.4
    """An axis (or joint group) is named when its speed is at least this fraction of the largest one."""
    lift_window_s: float = 1.0
    """An upward move starting this soon after a gripper closes is called "lift"."""
    carry_ratio: float = 0.1
    """Subtasks: a grasp moving less than this share of the episode's extent before opening carried nothing."""
    push_travel_ratio: float = 0.1
    """Subtasks: a low sideways move with no gripper event, of this share of the horizontal extent, is a push."""
    onset_speed_ratio: float = 0.25
    """Subtasks: the hand sets off when its sideways speed passes this fraction of the 90th-percentile speed."""
