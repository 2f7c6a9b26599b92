"""The `--vqa.*` settings, validated at construction."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from steerable.annotate.module import ModuleSettings

__all__ = ["COORDINATE_FORMATS", "QUESTION_TYPES", "CoordinateFormat", "QuestionType", "VqaConfig"]

QuestionType = Literal["bbox", "keypoint", "count", "attribute", "spatial"]
QUESTION_TYPES: tuple[QuestionType, ...] = ("bbox", "keypoint", "count", "attribute", "spatial")
CoordinateFormat = Literal["auto", "pixels", "relative_1000", "normalized_0_1"]
COORDINATE_FORMATS: tuple[CoordinateFormat, ...] = ("auto", "pixels", "relative_1000", "normalized_0_1")


class VqaConfig(ModuleSettings):
    """Which frames, cameras and question types get a grounded question, and how answers are read."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    section: ClassVar[str] = "vqa"
    doc: ClassVar[str | None] = "docs/vqa.md"

    enabled: bool = Field(True, description="write grounded question/answer pairs per camera")
    vqa_emission_hz: float = Field(
        1.0, gt=0.0, le=30.0, description="questions per second of episode, per camera"
    )
    question_types: tuple[QuestionType, ...] = Field(
        QUESTION_TYPES, description="question types to draw from (comma-separated)"
    )
    cameras: list[str] | None = Field(
        None, description="camera keys to ask about (a unique suffix like 'top' works); null = every camera"
    )
    restrict_to_default_camera: bool = Field(False, description="ask about the default camera only")
    coordinate_format: CoordinateFormat = Field(
        "auto",
        description="how the model writes coordinates: pixels, relative_1000 (Qwen/Gemini), "
        "normalized_0_1, or auto (asks for relative_1000, detects per answer; see docs/vqa.md)",
    )
    auto_ambiguous_as: Literal["relative_1000", "pixels"] = Field(
        "relative_1000", description="auto mode: how to read an answer whose numbers fit both scales"
    )
    out_of_range: Literal["clip", "reject"] = Field(
        "clip", description="coordinates outside the frame: clip them to it, or drop the answer"
    )
    max_questions_per_episode: int | None = Field(
        None, ge=1, description="cap on question/answer pairs per episode (all cameras); null = no cap"
    )
    max_retries: int = Field(
        1, ge=0, le=5, description="re-asks after an answer of the wrong shape or out of the frame"
    )

    @field_validator("question_types", mode="after")
    @classmethod
    def _distinct_types(cls, value: tuple[QuestionType, ...]) -> tuple[QuestionType, ...]:
        if not value:
            raise ValueError(f"name at least one question type of {', '.join(QUESTION_TYPES)}")
        # A canonical order, so the same set always gives the same random draws.
        return tuple(t for t in QUESTION_TYPES if t in value)

    @model_validator(mode="after")
    def _one_camera_rule(self) -> VqaConfig:
        if self.cameras is not None and not self.cameras:
            raise ValueError("cameras is empty: list camera keys, or null for every camera")
        if self.cameras is not None and self.restrict_to_default_camera:
            raise ValueError("set either cameras or restrict_to_default_camera, not both")
        return self
