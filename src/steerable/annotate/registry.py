"""The one list of annotation modules. Adding a module: its folder under `modules/`, one line here.

The order is the order modules are built in, dependencies first (motion is cheap and feeds
keystates to plan and interjections). `AnnotateConfig`, the up-front checks, "does this run need a
model" and building all iterate over `MODULES`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from steerable.annotate.module import AnnotationModule, BuildContext, ModuleCheck, ModuleStage
from steerable.annotate.modules.interjections.stage import InterjectionsStage
from steerable.annotate.modules.motion.stage import HEURISTIC_NOTE, MotionStage
from steerable.annotate.modules.plan.stage import PlanStage
from steerable.annotate.modules.vqa.stage import VqaStage

if TYPE_CHECKING:
    from steerable.vlm.protocol import VLMClient

__all__ = ["HEURISTIC_NOTE", "MODULES", "NO_MODEL_NOTE", "build_modules", "module_checks", "stage_named"]

MODULES: tuple[type[ModuleStage[Any]], ...] = (
    MotionStage,
    PlanStage,
    InterjectionsStage,
    VqaStage,
)

NO_MODEL_NOTE = (
    "no VLM configured: ran the no-model modules only (pass --vlm.base_url and --vlm.model_id "
    "for the modules that need a model)"
)


def stage_named(name: str) -> type[ModuleStage[Any]]:
    for stage in MODULES:
        if stage.name == name:
            return stage
    raise KeyError(name)


def build_modules(
    stages: Sequence[ModuleStage[Any]], vlm: VLMClient | None
) -> tuple[list[AnnotationModule], list[str]]:
    """The modules of the enabled `stages` this run can build, in registry order, and run notes.

    Without a model, the stages that need one are left out (with a note).
    """
    runnable = [s for s in stages if vlm is not None or not s.needs_model]
    ctx = BuildContext(vlm=vlm, running=frozenset(s.name for s in runnable))
    if len(runnable) < len(stages):
        ctx.notes.append(NO_MODEL_NOTE)
    modules = [stage.build(ctx) for stage in runnable]
    return modules, ctx.notes


def module_checks(stages: Sequence[ModuleStage[Any]], running: Sequence[str]) -> list[ModuleCheck]:
    """Row checks beyond the language schema, for the modules that ran."""
    checks = [s.row_check(running) for s in stages if s.name in running]
    return [c for c in checks if c is not None]
