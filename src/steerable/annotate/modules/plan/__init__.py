"""The plan module: effective task, task_aug, subtasks, plan and memory rows (with contact sheets)."""

from typing import TYPE_CHECKING

from steerable.annotate.modules.plan.config import PlanConfig
from steerable.annotate.modules.plan.stage import PlanStage
from steerable.lazy import lazy_exports

if TYPE_CHECKING:
    from steerable.annotate.modules.plan.module import KeystatePlanModule, PlanModule, make_plan_module

__all__ = ["KeystatePlanModule", "PlanConfig", "PlanModule", "PlanStage", "make_plan_module"]

__getattr__ = lazy_exports(
    __name__, {"KeystatePlanModule": "module", "PlanModule": "module", "make_plan_module": "module"}
)
