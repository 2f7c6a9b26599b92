"""The `steerable annotate` configuration tree: flags, YAML, and start-up checks of combinations."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from steerable.annotate.modules.interjections.config import InterjectionsConfig
from steerable.annotate.modules.plan.config import PlanConfig
from steerable.annotate.modules.vqa.config import VqaConfig
from steerable.annotate.motion.config import MotionConfig
from steerable.vlm.config import VLMConfig

__all__ = ["AnnotateConfig", "ExecutorConfig"]


class ExecutorConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    episode_parallelism: int = Field(
        16, ge=1, description="episodes in flight at once (VLM calls are capped by --vlm.client_concurrency)"
    )
    progress: bool = Field(True, description="live progress display on a terminal")


class AnnotateConfig(BaseModel):
    """Everything `steerable annotate` does; LeRobot's `lerobot-annotate` flag names where they match."""

    model_config = ConfigDict(extra="forbid")

    root: Path | None = Field(None, description="local dataset folder (annotated in place unless --output_dir)")
    repo_id: str | None = Field(None, description="Hub dataset to download when --root is not given")
    revision: str | None = Field(None, description="Hub revision to download (default: the v3.0 tag)")
    output_dir: Path | None = Field(
        None, description="write an annotated copy here and leave the source untouched"
    )
    new_repo_id: str | None = Field(None, description="push target when it differs from --repo_id")
    push_to_hub: bool = Field(False, description="upload the annotated dataset and move its version tag")
    push_private: bool = Field(False, description="create the pushed repo as private")
    push_commit_message: str | None = Field(None, description="commit message of the upload")
    only_episodes: list[int] | None = Field(None, description="annotate only these episodes, e.g. 0,3,7")
    seed: int = Field(1729, description="seed of every random choice (per episode and purpose)")
    force: bool = Field(False, description="redo staged work instead of resuming it")
    staging_dir: Path | None = Field(None, description="staging folder (default: <dataset>/.steerable/staging)")
    summary_path: Path | None = Field(
        None, description="run summary JSON (default: <dataset>/.steerable/run_summary.json)"
    )
    plan: PlanConfig = Field(default_factory=PlanConfig)
    interjections: InterjectionsConfig = Field(default_factory=InterjectionsConfig)
    vqa: VqaConfig = Field(default_factory=VqaConfig)
    motion: MotionEnabledConfig = Field(default_factory=lambda: MotionEnabledConfig())
    vlm: VLMConfig = Field(default_factory=VLMConfig)
    executor: ExecutorConfig = Field(default_factory=ExecutorConfig)

    @model_validator(mode="after")
    def _check_combinations(self) -> AnnotateConfig:
        if self.root is None and self.repo_id is None:
            raise ValueError("name the dataset with --root DIR or --repo_id USER/NAME")
        if self.push_to_hub and not (self.new_repo_id or self.repo_id):
            raise ValueError("--push_to_hub needs a target: --repo_id or --new_repo_id")
        same = self.output_dir is not None and self.root is not None
        if same and Path(self.output_dir).resolve() == Path(self.root).resolve():  # type: ignore[arg-type]
            raise ValueError("--output_dir is the same folder as --root; drop --output_dir to write in place")
        if self.only_episodes is not None and any(i < 0 for i in self.only_episodes):
            raise ValueError("--only_episodes takes episode indices >= 0")
        if self.plan.enabled and self.plan.snap_to_keystates and not self.motion.enabled:
            raise ValueError(
                "--plan.snap_to_keystates needs the motion module's keystates: drop --motion.enabled false"
            )
        if not any((self.plan.enabled, self.interjections.enabled, self.vqa.enabled, self.motion.enabled)):
            raise ValueError("every module is disabled: there is nothing to annotate")
        return self


class MotionEnabledConfig(MotionConfig):
    """`--motion.*`: the motion module's switch plus the detector settings."""

    enabled: bool = Field(True, description="run the no-model motion annotator")
    subtask_granularity: Literal["coarse", "fine"] = Field(
        "coarse",
        description="heuristic subtasks without a VLM: coarse (pick up / place) or fine (reach, grasp, move...)",
    )


AnnotateConfig.model_rebuild()
