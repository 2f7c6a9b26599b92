"""The vqa module's stage: needs a model and video; `--vqa.cameras` must name cameras of the dataset."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from steerable.annotate.module import (
    AnnotationModule,
    BuildContext,
    Input,
    ModuleCheck,
    ModuleSettings,
    ModuleStage,
)
from steerable.annotate.modules.vqa.config import VqaConfig

if TYPE_CHECKING:
    from steerable.dataset import LeRobotDataset

__all__ = ["VqaStage"]


class VqaStage(ModuleStage[VqaConfig]):
    name: ClassVar[str] = "vqa"
    settings_type: ClassVar[type[ModuleSettings]] = VqaConfig
    inputs: ClassVar[frozenset[Input]] = frozenset({"video"})
    styles: ClassVar[frozenset[str | None]] = frozenset({"vqa"})

    def check(self, dataset: LeRobotDataset, *, camera: str | None) -> None:
        from steerable.annotate.modules.vqa.module import resolve_cameras

        resolve_cameras(self.settings, dataset.camera_keys, camera)  # ConfigError on an unknown camera

    def build(self, ctx: BuildContext) -> AnnotationModule:
        from steerable.annotate.modules.vqa.module import VqaModule

        return VqaModule(self.settings, vlm=ctx.vlm)

    def row_check(self, running: Collection[str]) -> ModuleCheck | None:
        from steerable.annotate.modules.vqa.answers import camera_frame_sizes
        from steerable.annotate.modules.vqa.module import validate_vqa_rows

        def check(rows: list[dict[str, Any]], facts: Mapping[str, Any]) -> list[str]:
            ds: LeRobotDataset = facts["dataset"]
            return validate_vqa_rows(rows, ds.camera_keys, camera_frame_sizes(ds.features))

        return check
