"""The interjections module's stage: needs a model; reads plan rows (or motion keystates) when present."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any, ClassVar

from steerable.annotate.module import AnnotationModule, BuildContext, ModuleCheck, ModuleSettings, ModuleStage
from steerable.annotate.modules.interjections.config import InterjectionsConfig

__all__ = ["InterjectionsStage"]


class InterjectionsStage(ModuleStage[InterjectionsConfig]):
    name: ClassVar[str] = "interjections"
    settings_type: ClassVar[type[ModuleSettings]] = InterjectionsConfig
    # No required inputs: it shows frames when there is a camera, and works from the labels otherwise.
    # Its plan refreshes are written only beside the plan module's rows, which replace the plans.
    styles: ClassVar[frozenset[str | None]] = frozenset({"interjection", None})

    def build(self, ctx: BuildContext) -> AnnotationModule:
        from steerable.annotate.modules.interjections.module import InterjectionsModule

        return InterjectionsModule(self.settings, vlm=ctx.vlm)

    def row_check(self, running: Collection[str]) -> ModuleCheck | None:
        from steerable.annotate.modules.interjections.module import validate_interjection_rows

        def check(rows: list[dict[str, Any]], facts: Mapping[str, Any]) -> list[str]:
            has_plan = any(r.get("style") == "plan" for r in rows)
            return validate_interjection_rows(rows, has_plan)

        return check
