"""The stage contract every annotation module implements, and what it hands back."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, runtime_checkable

from steerable.annotate.context import EpisodeContext

__all__ = ["AnnotationModule", "ModuleOutput"]


@dataclass
class ModuleOutput:
    """Rows a module produced for one episode, in staged form.

    Every row carries `timestamp`: for persistent styles its emission time, for event styles the
    stored timestamp of the frame it belongs on. `meta` holds small facts later modules may use
    (e.g. the effective task); `notes` are human-readable remarks for the run summary.
    """

    rows: list[dict[str, Any]] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


@runtime_checkable
class AnnotationModule(Protocol):
    """One step of the per-episode pipeline (plan, interjections, vqa, motion)."""

    name: ClassVar[str]
    # Modules whose staged output this one reads (through `EpisodeContext.upstream`).
    requires: ClassVar[tuple[str, ...]]

    def fingerprint(self) -> dict[str, Any]:
        """Everything that changes this module's output: config, prompt texts, model id.

        Staging stores its hash; a re-run whose fingerprint matches skips the episode.
        """
        ...

    async def run(self, ctx: EpisodeContext) -> ModuleOutput: ...
