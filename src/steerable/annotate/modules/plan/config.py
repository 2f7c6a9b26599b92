"""The `--plan.*` settings of the plan module, validated at construction."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from steerable.annotate.module import ModuleSettings

__all__ = ["DeriveMode", "PlanConfig"]

DeriveMode = Literal["off", "if_short", "always"]


class PlanConfig(ModuleSettings):
    """What the plan module asks the model, how it shows the video, and which rows it writes.

    Names follow `lerobot-annotate` where the concept is the same. See docs/plan.md.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)
    section: ClassVar[str] = "plan"
    doc: ClassVar[str | None] = "docs/plan.md"

    enabled: bool = True
    """Run the plan module (subtask, plan, memory and task_aug rows)."""
    n_task_rephrasings: int = Field(10, ge=0, le=100)
    """How many rephrasings of the task to ask for (task_aug rows); 0 writes no task_aug rows."""
    derive_task_from_video: DeriveMode = "if_short"
    """Describe the task from the video: off, if_short (empty, short or placeholder task) or always."""
    derive_task_min_words: int = Field(3, ge=0)
    """With if_short, a task of fewer words than this is derived from the video."""
    frames_per_second: float = Field(2.0, gt=0.0, le=60.0)
    """Rate at which frames are sampled for the contact sheets."""
    max_frames_per_prompt: int = Field(60, ge=4)
    """Most frames in one prompt; a longer episode is split into overlapping windows."""
    window_overlap_s: float = Field(4.0, ge=0.0)
    """Seconds shared by consecutive windows, so an action cut by a window edge is seen whole."""
    contact_sheet_columns: int = Field(5, ge=1, le=20)
    """Tiles per row of a contact sheet."""
    contact_sheet_frames_per_sheet: int = Field(20, ge=1, le=100)
    """Most tiles on one contact sheet."""
    contact_sheet_frame_width: int = Field(224, ge=32, le=2048)
    """Width in pixels of each tile (height keeps the camera's aspect ratio)."""
    contact_sheet_quality: int = Field(84, ge=1, le=100)
    """JPEG quality of sheets written to disk (`steerable sheets`); the VLM client encodes its own."""
    min_subtask_seconds: float = Field(1.5, ge=0.0)
    """Shortest subtask kept; shorter ones are merged into a neighbour."""
    plan_max_steps: int = Field(8, ge=1, le=100)
    """Most subtasks per episode; beyond it the shortest are merged into a neighbour."""
    subtask_describe_first: bool = True
    """Ask for a plain description of the video before segmenting it (one more call per window)."""
    emit_plan: bool = True
    """Write a plan row (numbered subtasks) at the first frame."""
    emit_memory: bool = True
    """Write a memory row at each subtask boundary after the first."""
    snap_to_keystates: bool = False
    """Move subtask boundaries onto nearby motion keystates (gripper events, pauses) when available."""
    snap_tolerance_s: float = Field(0.5, ge=0.0)
    """Farthest a boundary may move when snapping to a keystate."""

    @field_validator("derive_task_from_video", mode="before")
    @classmethod
    def _lowercase(cls, value: Any) -> Any:
        return value.strip().lower() if isinstance(value, str) else value

    @model_validator(mode="after")
    def _check_windows(self) -> PlanConfig:
        # Windows advance by (window - overlap); an overlap of half a window or more would make
        # every frame appear in three windows or stall the split.
        if self.window_overlap_s * self.frames_per_second >= self.max_frames_per_prompt / 2:
            raise ValueError(
                "window_overlap_s must be shorter than half a window "
                f"({self.max_frames_per_prompt / 2 / self.frames_per_second:g} s at these settings)"
            )
        return self

    def max_frames_per_second(self) -> float:
        """The highest sampling rate these window settings allow (the overlap stays under half a window)."""
        if self.window_overlap_s <= 0:
            return 60.0
        return min(60.0, self.max_frames_per_prompt / 2 / self.window_overlap_s)

    def overlap_frames(self) -> int:
        """Sampled frames shared by consecutive windows."""
        return min(round(self.window_overlap_s * self.frames_per_second), (self.max_frames_per_prompt - 1) // 2)

