"""Which modules a run uses, in which order, and the extra checks each brings to validation."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from steerable.annotate.collect import ModuleCheck
from steerable.annotate.config import AnnotateConfig
from steerable.annotate.module import AnnotationModule
from steerable.annotate.modules.interjections.module import InterjectionsModule, validate_interjection_rows
from steerable.annotate.modules.motion import MotionModule
from steerable.annotate.modules.plan.module import make_plan_module
from steerable.annotate.modules.vqa.answers import camera_frame_sizes
from steerable.annotate.modules.vqa.module import VqaModule, validate_vqa_rows
from steerable.dataset import LeRobotDataset

__all__ = ["HEURISTIC_NOTE", "NO_MODEL_NOTE", "build_modules", "module_checks"]

NO_MODEL_NOTE = (
    "no VLM configured: ran the no-model motion annotator only (pass --vlm.base_url and --vlm.model_id "
    "for plan, interjections and vqa)"
)
HEURISTIC_NOTE = "subtask rows are heuristic: derived from gripper events and pauses, not from a model"


def build_modules(
    cfg: AnnotateConfig, vlm: Any | None, ds: LeRobotDataset
) -> tuple[list[AnnotationModule], list[str]]:
    """The enabled modules in dependency order (motion first: it is cheap and feeds keystates)."""
    notes: list[str] = []
    modules: list[AnnotationModule] = []
    plan_runs = vlm is not None and cfg.plan.enabled
    if cfg.motion.enabled:
        derive = not plan_runs
        modules.append(MotionModule(cfg.motion, derive_subtasks=derive))
        if derive:
            notes.append(HEURISTIC_NOTE)
    if vlm is None:
        notes.append(NO_MODEL_NOTE)
        return modules, notes
    if cfg.plan.enabled:
        modules.append(make_plan_module(cfg.plan, vlm=vlm))
    if cfg.interjections.enabled:
        modules.append(InterjectionsModule(cfg.interjections, vlm=vlm))
    if cfg.vqa.enabled:
        modules.append(VqaModule(cfg.vqa, vlm=vlm))
    return modules, notes


def module_checks(modules: list[AnnotationModule]) -> list[ModuleCheck]:
    """Row checks beyond the language schema, for the modules that ran."""
    names = {m.name for m in modules}
    checks: list[ModuleCheck] = []
    if "interjections" in names:

        def interjections(rows: list[dict[str, Any]], facts: Mapping[str, Any]) -> list[str]:
            has_plan = any(r.get("style") == "plan" for r in rows)
            return validate_interjection_rows(rows, has_plan)

        checks.append(interjections)
    if "vqa" in names:

        def vqa(rows: list[dict[str, Any]], facts: Mapping[str, Any]) -> list[str]:
            ds: LeRobotDataset = facts["dataset"]
            return validate_vqa_rows(rows, ds.camera_keys, camera_frame_sizes(ds.features))

        checks.append(vqa)
    return checks
