"""The tool catalog kept in `meta/info.json["tools"]`: OpenAI function schemas, always including `say`."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["DEFAULT_TOOLS", "SAY_TOOL", "merge_tools", "tool_name", "tool_schema", "tools_from_info"]

SAY_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "say",
        "description": "Say a short sentence out loud to the person working with the robot.",
        "parameters": {
            "type": "object",
            "properties": {"text": {"type": "string", "description": "Exactly the words to speak."}},
            "required": ["text"],
        },
    },
}

DEFAULT_TOOLS: list[dict[str, Any]] = [SAY_TOOL]


def tool_name(schema: Mapping[str, Any]) -> str | None:
    """The function name a tool schema declares, or None when it declares none."""
    function = schema.get("function")
    if isinstance(function, Mapping) and isinstance(function.get("name"), str):
        return str(function["name"])
    return None


def tools_from_info(info: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Copies of the catalog declared in an info.json dict, or of DEFAULT_TOOLS when none is declared."""
    declared = info.get("tools")
    source = declared if isinstance(declared, list) and declared else DEFAULT_TOOLS
    return copy.deepcopy(list(source))


def merge_tools(
    existing: Sequence[Mapping[str, Any]] | None, required: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """`existing` (kept as is, in order) plus each `required` tool whose name it lacks; idempotent."""
    merged = [copy.deepcopy(dict(tool)) for tool in existing or ()]
    names = {tool_name(tool) for tool in merged}
    for tool in required:
        if tool_name(tool) not in names:
            merged.append(copy.deepcopy(dict(tool)))
            names.add(tool_name(tool))
    return merged


def tool_schema(name: str, tools: Sequence[Mapping[str, Any]] | None = None) -> dict[str, Any] | None:
    """A copy of the schema of the tool called `name` in `tools` (default catalog when None)."""
    for tool in DEFAULT_TOOLS if tools is None else tools:
        if tool_name(tool) == name:
            return copy.deepcopy(dict(tool))
    return None
