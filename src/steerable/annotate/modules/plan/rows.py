"""The plan module's staged rows, built deterministically from the final subtask list."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from steerable.annotate.modules.plan.spans import Span

__all__ = ["memory_rows", "plan_rows", "plan_text", "subtask_rows", "task_aug_rows"]


def _row(role: str, style: str, content: str, timestamp: float) -> dict[str, Any]:
    return {
        "role": role,
        "content": content,
        "style": style,
        "timestamp": float(timestamp),
        "camera": None,
        "tool_calls": None,
    }


def plan_text(steps: Sequence[str]) -> str:
    """A plan as numbered lines: "1. pick up cup\\n2. place cup on shelf"."""
    return "\n".join(f"{i}. {step}" for i, step in enumerate(steps, 1))


def task_aug_rows(first_frame: float, task: str, variants: Sequence[str]) -> list[dict[str, Any]]:
    """The effective task first (so rotating over task_aug always includes it), then its variants."""
    return [_row("user", "task_aug", text, first_frame) for text in [task, *variants] if text]


def subtask_rows(spans: Sequence[Span]) -> list[dict[str, Any]]:
    return [_row("assistant", "subtask", s.text, s.start) for s in spans]


def plan_rows(spans: Sequence[Span]) -> list[dict[str, Any]]:
    """One plan at the first subtask's start (the first frame) listing every subtask.

    The plan is not re-emitted at each boundary: the active subtask already marks progress, and
    refreshes belong to the moments the plan changes (interjections).
    """
    return [_row("assistant", "plan", plan_text([s.text for s in spans]), spans[0].start)] if spans else []


def memory_rows(spans: Sequence[Span], memories: Sequence[str]) -> list[dict[str, Any]]:
    """Memory i at the start of subtask i+1, i.e. as soon as subtask i is complete."""
    if len(memories) != max(0, len(spans) - 1):
        raise ValueError(f"{len(memories)} memories for {len(spans)} subtasks (need one per boundary)")
    return [_row("assistant", "memory", text, span.start) for span, text in zip(spans[1:], memories, strict=True)]
