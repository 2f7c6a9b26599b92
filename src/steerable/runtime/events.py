"""What the control loop reports and how it renders a prompt: the types its halves share.

`steerable.runtime.loop` (the loop), `steerable.runtime.chunks` (chunk inference) and
`steerable.runtime.high_level` (high-level calls) all name these; here, below the three, each imports
them one way (the loop re-exports them under their old address).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from steerable.control import Observation, RequestKind

if TYPE_CHECKING:
    from steerable.runtime.state import RuntimeState

__all__ = ["EventKind", "PromptSource", "RuntimeEvent"]

EventKind = Literal[
    "task", "subtask", "plan", "memory", "interjection", "speech", "question", "answer", "tool", "mode", "done",
    "warn", "info",
]
# Renders the high-level prompt (chat messages) for a request; see steerable.runtime.prompts.
PromptSource = Callable[[RequestKind, "RuntimeState", Observation | None, str | None], list[dict[str, Any]]]


@dataclass(frozen=True)
class RuntimeEvent:
    """Something that happened at control tick `frame` (the recording's frame index). An operator's
    interjection or question is at the tick it was received, not the later one that applied it; an
    answer names its question's tick (`question_frame`), however many ticks the model took."""

    kind: EventKind
    text: str
    frame: int
    time_s: float
    question_frame: int | None = None
