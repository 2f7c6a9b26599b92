"""The `--interjections.*` settings, validated at construction."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import ConfigDict, Field, field_validator

from steerable.annotate.module import ModuleSettings

__all__ = ["SCENARIOS", "InterjectionsConfig", "Scenario"]

Scenario = Literal["negative_task", "situated_correction", "specific_constraint", "preference"]
# The Hi Robot taxonomy of user interjections (Shi et al. 2025), in a fixed order.
SCENARIOS: tuple[Scenario, ...] = (
    "negative_task",
    "situated_correction",
    "specific_constraint",
    "preference",
)


class InterjectionsConfig(ModuleSettings):
    """How many interjections an episode gets, where, of which kinds, and what comes with them."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    section: ClassVar[str] = "interjections"
    doc: ClassVar[str | None] = "docs/interjections.md"

    enabled: bool = Field(True, description="write interjections with their `say` replies")
    max_interjections_per_episode: int = Field(
        3, ge=0, description="interjections per episode at most (one VLM call each)"
    )
    interjection_min_t: float = Field(2.0, ge=0.0, description="no interjection earlier than this (seconds)")
    interjection_window_seconds: float = Field(
        2.0, ge=0.0, description="width of the visual context centred on the interjection time"
    )
    interjection_window_frames: int = Field(4, ge=1, le=16, description="frames shown over that window")
    scenarios: tuple[Scenario, ...] = Field(
        SCENARIOS, description="Hi Robot scenario kinds to draw from (comma-separated)"
    )
    initial_acknowledgement: bool = Field(True, description="a spoken reply to the task at the first frame")
    plan_refresh: bool = Field(
        True, description="rewrite the plan at each interjection (only where plan rows exist)"
    )

    @field_validator("scenarios", mode="after")
    @classmethod
    def _distinct_scenarios(cls, value: tuple[Scenario, ...]) -> tuple[Scenario, ...]:
        if not value:
            raise ValueError(f"name at least one scenario of {', '.join(SCENARIOS)}")
        # Keep the taxonomy's order so the same set always gives the same draws.
        return tuple(s for s in SCENARIOS if s in value)
