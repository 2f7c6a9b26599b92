"""The motion module's stage: no model, reads the state vector, checks dimension overrides up front."""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING, ClassVar

from steerable.annotate.module import AnnotationModule, BuildContext, Input, ModuleSettings, ModuleStage
from steerable.annotate.modules.motion.config import MotionConfig

if TYPE_CHECKING:
    from steerable.dataset import LeRobotDataset

__all__ = ["HEURISTIC_NOTE", "MotionStage"]

HEURISTIC_NOTE = "subtask rows are heuristic: derived from gripper events and pauses, not from a model"


class MotionStage(ModuleStage[MotionConfig]):
    name: ClassVar[str] = "motion"
    settings_type: ClassVar[type[ModuleSettings]] = MotionConfig
    inputs: ClassVar[frozenset[Input]] = frozenset({"state"})
    needs_model: ClassVar[bool] = False
    # Plan and memory only on the episodes whose task names the units (`name_from_task`).
    styles: ClassVar[frozenset[str | None]] = frozenset({"motion", "subtask", "plan", "memory"})

    def replaces(self, running: Collection[str]) -> frozenset[str | None]:
        # Heuristic subtasks only without the plan module, which then writes the subtasks itself. Plan
        # and memory rows replace the stored ones only on the episodes that get them (a named episode):
        # elsewhere an earlier plan stays, as it did before naming existed.
        return frozenset({"motion", "subtask"}) if "plan" not in running else frozenset({"motion"})

    def check(self, dataset: LeRobotDataset, *, camera: str | None) -> None:
        from steerable.motion.dims import find_dims

        find_dims(dataset.features, self.settings.params(), dataset.stats)  # ConfigError on a bad override

    def build(self, ctx: BuildContext) -> AnnotationModule:
        from steerable.annotate.modules.motion.module import MotionModule

        # Without the plan module the motion rows are the only subtasks the episode gets.
        derive = "plan" not in ctx.running
        if derive:
            ctx.notes.append(HEURISTIC_NOTE)
        return MotionModule(self.settings, derive_subtasks=derive)
