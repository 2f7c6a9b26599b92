"""Tool registry: which tools exist, which a dataset declares, and validated dispatch.

A model's tool call is checked before anything runs: an unknown name or arguments that break the
tool's JSON schema are refused with a message (never executed), and the caller's loop goes on.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import jsonschema

from steerable.language.tools import tool_name, tools_from_info
from steerable.tools.base import Tool

__all__ = ["TOOL_FACTORIES", "ToolOutcome", "ToolRegistry", "load_tools"]

logger = logging.getLogger(__name__)


def _say_factory(schema: dict[str, Any], options: Mapping[str, Any]) -> Tool:
    from steerable.tools.say import SayTool

    return SayTool.from_options(schema, options)


# Tool name -> factory(schema, options). A schema in info.json without a factory here is known to
# the model (it was trained to call it) but cannot run: its calls are refused.
TOOL_FACTORIES: dict[str, Callable[[dict[str, Any], Mapping[str, Any]], Tool]] = {"say": _say_factory}


@dataclass(frozen=True)
class ToolOutcome:
    """What became of one call: run (`ok`, `value`) or refused / failed (`message` says why)."""

    name: str
    arguments: Mapping[str, Any]
    ok: bool
    message: str
    value: Any = None


class ToolRegistry:
    """The tools a run can execute, by name, with schema validation before every call."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        self._validators: dict[str, jsonschema.protocols.Validator] = {}
        for tool in tools:
            self.add(tool)

    def add(self, tool: Tool) -> None:
        parameters = tool.schema.get("function", {}).get("parameters") or {"type": "object"}
        cls = jsonschema.validators.validator_for(parameters)
        cls.check_schema(parameters)
        self._tools[tool.name] = tool
        self._validators[tool.name] = cls(parameters)

    @property
    def names(self) -> list[str]:
        return sorted(self._tools)

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def schemas(self) -> list[dict[str, Any]]:
        return [self._tools[n].schema for n in self.names]

    def check(self, name: str, arguments: Any) -> str | None:
        """Why a call of `name` with `arguments` would be refused, or None when it is valid."""
        if name not in self._tools:
            known = ", ".join(self.names) or "none"
            return f"no tool named {name!r} (known: {known})"
        if not isinstance(arguments, Mapping):
            return f"arguments must be a JSON object, got {type(arguments).__name__}"
        errors = sorted(self._validators[name].iter_errors(dict(arguments)), key=lambda e: list(e.path))
        if errors:
            where = "/".join(str(p) for p in errors[0].path)
            return f"invalid arguments{' at ' + where if where else ''}: {errors[0].message}"
        return None

    def dispatch(self, name: str, arguments: Any) -> ToolOutcome:
        """Validate, then run; a refusal or a tool failure is reported, never raised."""
        args = arguments if isinstance(arguments, Mapping) else {}
        problem = self.check(name, arguments)
        if problem is not None:
            logger.info("refused tool call %r: %s", name, problem)
            return ToolOutcome(name, args, False, f"refused tool call {name!r}: {problem}")
        try:
            value = self._tools[name].call(args)
        except Exception as exc:  # a tool failing must not stop the robot's loop
            logger.info("tool %r failed: %s", name, exc)
            return ToolOutcome(name, args, False, f"tool {name!r} failed: {type(exc).__name__}: {exc}")
        return ToolOutcome(name, args, True, f"{name} ok", value)


def load_tools(info: Mapping[str, Any], **options: Any) -> ToolRegistry:
    """Instantiate the tools `info.json` declares (default catalog: `say`) that we can run.

    `options` are shared settings handed to each factory (e.g. `tts="espeak"`, `output_dir=...`).
    Declared tools without an implementation are skipped with a log line; their calls are refused.
    """
    registry = ToolRegistry()
    for schema in tools_from_info(info):
        name = tool_name(schema)
        if name is None:
            continue
        factory = TOOL_FACTORIES.get(name)
        if factory is None:
            logger.info("tool %r is declared but has no implementation here; its calls will be refused", name)
            continue
        registry.add(factory(schema, options))
    return registry
