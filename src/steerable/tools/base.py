"""The `Tool` contract: a name, the OpenAI function schema a model sees, and a call.

Arguments reach `call` already validated against the schema's `parameters` (the registry checks
them first), so an implementation only does its job.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

__all__ = ["Tool"]


@runtime_checkable
class Tool(Protocol):
    """A tool a model may call. `name` equals `schema["function"]["name"]`."""

    name: str
    schema: dict[str, Any]

    def call(self, arguments: Mapping[str, Any]) -> Any:
        """Run the tool; the return value is tool-specific (a wav path, a dict, None)."""
        ...
