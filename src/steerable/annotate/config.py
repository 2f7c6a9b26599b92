"""The `steerable annotate` configuration tree: flags, YAML, and start-up checks of combinations.

The run's own settings are declared here; each module's section (`--plan.*`, `--motion.*`...) comes
from the registry, so a new module adds its flags without touching this file.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from steerable.annotate.module import ModuleSettings, ModuleStage
from steerable.annotate.registry import MODULES
from steerable.dataset.hub import looks_like_repo_id
from steerable.errors import ConfigError
from steerable.settings import Episodes, Settings, episodes_field
from steerable.vlm.config import VLMConfig

__all__ = ["AnnotateConfig", "ExecutorConfig"]


class ExecutorConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    episode_parallelism: int = Field(
        16, ge=1, description="episodes in flight at once (VLM calls are capped by --vlm.client_concurrency)"
    )
    progress: bool = Field(True, description="live progress display on a terminal")
    progress_every_s: float = Field(
        30.0, gt=0.0, description="without a terminal (CI, nohup): seconds between progress lines on stderr"
    )
    # Where episodes run (docs/distributed.md): this process, or actors on a Ray cluster.
    backend: Literal["local", "ray"] = Field("local", description="local | ray (extra [ray])")
    address: str | None = Field(
        None, description="Ray cluster to join: auto | HOST:PORT (default: start a local one)"
    )
    workers: int | None = Field(None, ge=1, description="Ray actors (default: one per node)")
    worker_cpus: float = Field(1.0, gt=0, description="CPUs each Ray actor reserves")
    worker_gpus: float = Field(0.0, ge=0, description="GPUs each Ray actor reserves (vLLM replica per actor)")
    batch_episodes: int | None = Field(
        None, ge=1, description="episodes per batch sent to an actor (default: a quarter of its share)"
    )
    max_restarts: int = Field(3, ge=0, description="actors started in place of dead ones before giving up")

    @model_validator(mode="after")
    def _ray_only(self) -> ExecutorConfig:
        if self.backend != "ray" and self.address is not None:
            raise ValueError("--executor.address needs --executor.backend ray")
        return self


class AnnotateConfig(Settings):
    """Everything `steerable annotate` does; LeRobot's `lerobot-annotate` flag names where they match."""

    model_config = ConfigDict(extra="forbid")
    positional: ClassVar[tuple[str, ...]] = ("dataset",)

    # The one spelling of the other commands (`annotate DATASET`, `--dataset D`), read into root or repo_id.
    dataset: str | None = Field(
        None, exclude=True, description="a local dataset folder (read as --root) or a Hub repo id (as --repo_id)")
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
    only_episodes: Episodes = episodes_field("annotate only these episodes, e.g. 0,3,7-9")
    seed: int = Field(1729, description="seed of every random choice (per episode and purpose)")
    force: bool = Field(False, description="redo staged work instead of resuming it")
    include_reviewed: bool = Field(
        False, description="also re-annotate episodes a person reviewed or corrected (`steerable view --edit`)"
    )
    allow_failures: bool = Field(False, description="exit 0 even when some episodes failed (default: exit 1)")
    staging_dir: Path | str | None = Field(
        None, description="staging folder or fsspec URL, e.g. s3://bucket/run (default: <dataset>/.steerable/staging)"
    )
    summary_path: Path | None = Field(
        None, description="run summary JSON (default: <dataset>/.steerable/run_summary.json)"
    )
    # One section per registered module, in registry order (`--plan.enabled`, `--motion.gripper_dims`...).
    for _stage in MODULES:
        __annotations__[_stage.name] = _stage.settings_type
        locals()[_stage.name] = Field(default_factory=_stage.settings_type)
    del _stage
    vlm: VLMConfig = Field(default_factory=VLMConfig)
    executor: ExecutorConfig = Field(default_factory=ExecutorConfig)

    def settings(self, module: str) -> ModuleSettings:
        """The settings section of `module` (a registry name)."""
        value = getattr(self, module)
        assert isinstance(value, ModuleSettings)
        return value

    @field_validator("staging_dir", mode="after")
    @classmethod
    def _staging_location(cls, value: Path | str | None) -> Path | str | None:
        """A URL (`proto://...`) stays a string for fsspec; anything else is a local path."""
        if isinstance(value, str) and "://" not in value:
            return Path(value)
        return value

    def stages(self) -> list[ModuleStage[Any]]:
        """The enabled modules' stages, in registry order."""
        return [stage(self.settings(stage.name)) for stage in MODULES if self.settings(stage.name).enabled]

    @model_validator(mode="before")
    @classmethod
    def _dataset_word(cls, data: Any) -> Any:
        """DATASET names a Hub repo (--repo_id) or a local folder (--root), by the rule `open_dataset` reads it
        with (`dataset.hub.looks_like_repo_id`); a word that is neither a repo id nor a folder is refused here."""
        if not isinstance(data, dict) or data.get("dataset") is None:
            return data
        data = dict(data)
        word = str(data.pop("dataset"))
        target = "repo_id" if looks_like_repo_id(word) else "root"
        if target == "root" and not os.path.isdir(word):
            raise ConfigError(f"DATASET {word}: {Path(word).expanduser().resolve()} is not a folder (a Hub dataset is "
                              "named USER/NAME)")
        if data.get(target) is not None and str(data[target]) != word:
            raise ConfigError(f"name the dataset once; got DATASET {word}, --{target} {data[target]}")
        data[target] = word
        return data

    @model_validator(mode="after")
    def _check_combinations(self) -> AnnotateConfig:
        if self.root is None and self.repo_id is None:
            raise ValueError("name the dataset with --root DIR or --repo_id USER/NAME")
        if self.push_to_hub and not (self.new_repo_id or self.repo_id):
            raise ValueError("--push_to_hub needs a target: --repo_id or --new_repo_id")
        same = self.output_dir is not None and self.root is not None
        if same and Path(self.output_dir).resolve() == Path(self.root).resolve():  # type: ignore[arg-type]
            raise ValueError("--output_dir is the same folder as --root; drop --output_dir to write in place")
        stages = self.stages()
        if not stages:
            raise ValueError("every module is disabled: there is nothing to annotate")
        enabled = {s.name for s in stages}
        for stage in stages:
            for needed, why in stage.needs_modules().items():
                if needed not in enabled:
                    raise ValueError(f"{why} needs the {needed} module: drop --{needed}.enabled false")
        return self
