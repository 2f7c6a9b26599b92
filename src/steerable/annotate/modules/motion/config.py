"""The `--motion.*` settings of the no-model motion annotator, validated at construction."""

from __future__ import annotations

from dataclasses import fields
from typing import ClassVar

from pydantic import ConfigDict, Field, model_validator

from steerable.annotate.module import ModuleSettings
from steerable.motion.params import DimRef, Granularity, MotionParams, PositionKind

__all__ = ["MotionConfig"]


class MotionConfig(ModuleSettings):
    """Which dimensions to read and the thresholds of the keystate and primitive detectors.

    Every time is in seconds and every ratio is relative to the episode itself, so one setting
    works across robots whose state is in metres, radians, degrees or normalised motor units.
    The motion library takes them as `MotionParams` (`params()`): every field but `enabled`,
    `subtask_granularity` and `name_from_task`, with the same names and defaults.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)
    section: ClassVar[str] = "motion"
    doc: ClassVar[str | None] = "docs/motion.md"

    enabled: bool = True
    """Run the no-model motion annotator."""
    subtask_granularity: Granularity = "coarse"
    """Heuristic subtasks without a VLM: coarse (pick up / place) or fine (reach, grasp, move...)."""
    name_from_task: bool = True
    """Heuristic subtasks: name each pick, place and push from the task's steps where the task names as
    many as the motion shows, and write a plan and a memory at each subtask (docs/motion.md)."""
    state_key: str | None = None
    """Vector feature to read; None tries observation.state, state, then the action, then any float vector."""
    action_key: str | None = None
    """Feature used when no state feature exists; None tries action, actions."""
    gripper_dims: list[DimRef] | None = None
    """Gripper dimensions of the feature by name or index; None finds them by name, [] means none."""
    position_dims: list[DimRef] | None = None
    """End-effector (x, y, z in that order) or joint dimensions; None finds them by name."""
    position_kind: PositionKind = "auto"
    """How to describe motion; auto is cartesian when the position names end in x/y/z."""
    gripper_closed_is_high: bool | None = None
    """True when a larger gripper value means more closed; None decides from the name (see docs/motion.md)."""
    flip_x: bool = False
    """Swap forward/back: by default +x is forward."""
    flip_y: bool = False
    """Swap left/right: by default +y is left."""
    flip_z: bool = False
    """Swap up/down: by default +z is up."""
    smoothing_s: float = Field(0.2, ge=0.0, le=5.0)
    """Width of the moving average applied to every signal before detection."""
    gripper_hysteresis: float = Field(0.3, gt=0.0, lt=1.0)
    """Swing, as a fraction of the episode's gripper range, that turns an opening into a closing or back."""
    pause_speed_ratio: float = Field(0.15, gt=0.0, lt=1.0)
    """A pause is slower than this fraction of the episode's 90th-percentile speed."""
    pause_speed: float | None = Field(None, gt=0.0)
    """Absolute pause speed (position units per second); overrides pause_speed_ratio."""
    min_pause_s: float = Field(0.0, ge=0.0)
    """Shortest stillness reported as a pause keystate; 0 keeps the brief stops between two moves."""
    min_primitive_s: float = Field(0.4, ge=0.0)
    """Shortest motion primitive kept; shorter ones merge into a neighbour (gripper events excepted)."""
    direction_ratio: float = Field(0.4, gt=0.0, le=1.0)
    """An axis (or joint group) is named when its speed is at least this fraction of the largest one."""
    lift_window_s: float = Field(1.0, ge=0.0)
    """An upward move starting this soon after a gripper closes is called "lift"."""
    carry_ratio: float = Field(0.1, ge=0.0, lt=1.0)
    """Heuristic subtasks: a grasp whose hand moves less than this share of the episode's extent before
    opening again carried nothing (a missed grasp or re-grasp) and stays inside the pick."""
    push_travel_ratio: float = Field(0.1, gt=0.0, lt=1.0)
    """Heuristic subtasks: a low sideways move with no gripper event, at least this share of the
    episode's horizontal extent, is a push (cartesian x/y/z only)."""
    onset_speed_ratio: float = Field(0.25, gt=0.0, lt=1.0)
    """Heuristic subtasks: the hand sets off toward the next subtask when its sideways speed passes
    this fraction of the episode's 90th-percentile speed (and 3 noise sigmas)."""

    @model_validator(mode="after")
    def _check_dims(self) -> MotionConfig:
        for key in ("gripper_dims", "position_dims"):
            refs = getattr(self, key) or []
            if len({str(r) for r in refs}) != len(refs):
                raise ValueError(f"{key} lists a dimension twice")
            if any(isinstance(r, int) and r < 0 for r in refs):
                raise ValueError(f"{key} has a negative index")
        return self

    def params(self) -> MotionParams:
        """These settings as the motion library's parameters."""
        values = {f.name: getattr(self, f.name) for f in fields(MotionParams)}
        for key in ("gripper_dims", "position_dims"):
            if values[key] is not None:
                values[key] = tuple(values[key])
        return MotionParams(**values)
