"""Language rows for the recipe and rendering tests: one builder of a persistent or event row. The
`say` atom is the library's own (`steerable.language.speech_row`)."""

from __future__ import annotations

from typing import Any

__all__ = ["row"]


def row(style: str | None, content: str | None, ts: float | None = None, role: str = "assistant",
        camera: str | None = None, tool_calls: list[Any] | None = None) -> dict[str, Any]:
    """A language row; `ts` (a persistent row's timestamp) only when given: event rows have none."""
    out: dict[str, Any] = {"role": role, "content": content, "style": style}
    if ts is not None:
        out["timestamp"] = ts
    out.update(camera=camera, tool_calls=tool_calls)
    return out
