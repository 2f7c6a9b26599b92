"""The plan module's stage: needs a model and a camera; snapping to keystates needs the motion module."""

from __future__ import annotations

from typing import ClassVar

from steerable.annotate.module import AnnotationModule, BuildContext, Input, ModuleSettings, ModuleStage
from steerable.annotate.modules.plan.config import PlanConfig

__all__ = ["PlanStage"]


class PlanStage(ModuleStage[PlanConfig]):
    name: ClassVar[str] = "plan"
    settings_type: ClassVar[type[ModuleSettings]] = PlanConfig
    inputs: ClassVar[frozenset[Input]] = frozenset({"video"})
    styles: ClassVar[frozenset[str | None]] = frozenset({"subtask", "plan", "memory", "task_aug"})

    def needs_modules(self) -> dict[str, str]:
        return {"motion": "--plan.snap_to_keystates"} if self.settings.snap_to_keystates else {}

    def build(self, ctx: BuildContext) -> AnnotationModule:
        from steerable.annotate.modules.plan.module import make_plan_module

        return make_plan_module(self.settings, vlm=ctx.vlm)
