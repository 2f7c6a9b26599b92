"""The plan module: effective task, task_aug, subtasks, plan and memory rows."""

from steerable.annotate.modules.plan.config import PlanConfig
from steerable.annotate.modules.plan.module import KeystatePlanModule, PlanModule, make_plan_module

__all__ = ["KeystatePlanModule", "PlanConfig", "PlanModule", "make_plan_module"]
