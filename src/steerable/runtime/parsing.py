"""Turn a model's generated text (or JSON reply) into a `HighLevelUpdate`.

Accepted shapes, mixed freely:
- a JSON object with any of `subtask`, `plan`, `memory`, `speech`/`say`, `answer`, `tool_calls`,
  `task_done` (the reply schema the VLM planner asks for);
- labelled lines: `Subtask: ...`, `Plan: ...` (numbered lines may follow), `Memory: ...`,
  `Answer: ...`;
- `<say>...</say>` markers (the way tokenizers flatten a `say` call), anywhere: every marker becomes
  speech and is removed from the rest of the text;
- bare text, which becomes `default_field` (what the prompt asked for, e.g. the subtask).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from steerable.runtime.protocols import HighLevelUpdate, ToolCall

__all__ = ["REPLY_FIELDS", "ParseError", "parse_generation", "parse_reply", "split_say"]

REPLY_FIELDS = ("subtask", "plan", "memory", "speech", "answer")
_SAY = re.compile(r"<\s*say\s*>(.*?)<\s*/\s*say\s*>", re.IGNORECASE | re.DOTALL)
_LABEL = re.compile(r"^\s*(subtask|plan|memory|answer|speech|say)\s*:\s*(.*)$", re.IGNORECASE)


class ParseError(ValueError):
    """The reply holds nothing the runtime can use."""


def split_say(text: str) -> tuple[str, list[str]]:
    """(text without the `<say>` markers, the spoken texts in order, quotes trimmed)."""
    spoken = [m.strip().strip("\"'").strip() for m in _SAY.findall(text)]
    rest = _SAY.sub(" ", text)
    rest = re.sub(r"[ \t]+\n", "\n", re.sub(r"[ \t]{2,}", " ", rest)).strip()
    return rest, [s for s in spoken if s]


def _tool_calls(raw: Any) -> tuple[ToolCall, ...]:
    """OpenAI-style calls (`{"function": {"name", "arguments"}}`, arguments maybe a JSON string)."""
    calls: list[ToolCall] = []
    for item in raw if isinstance(raw, list) else []:
        function = item.get("function", item) if isinstance(item, Mapping) else None
        if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
            raise ParseError(f"a tool call needs a function name, got {item!r}")
        args = function.get("arguments", {})
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except ValueError as exc:
                raise ParseError(f"tool call {function['name']!r} has arguments that are not JSON") from exc
        calls.append(ToolCall(function["name"], args if isinstance(args, Mapping) else {"value": args}))
    return tuple(calls)


def parse_reply(reply: Mapping[str, Any]) -> HighLevelUpdate:
    """A JSON reply (already decoded) as an update; text fields may still hold `<say>` markers."""
    fields: dict[str, str | None] = {}
    speech: list[str] = []
    for key in (*REPLY_FIELDS, "say"):
        value = reply.get(key)
        if value is None:
            continue
        if isinstance(value, list):  # a plan given as a list of steps
            value = "\n".join(f"{i}. {step}" for i, step in enumerate(value, 1))
        if not isinstance(value, str):
            raise ParseError(f"field {key!r} must be text, got {type(value).__name__}")
        text, said = split_say(value)
        speech += said
        if key in ("speech", "say"):
            speech += [text] if text else []
        else:
            fields[key] = text
    calls = _tool_calls(reply.get("tool_calls"))
    speech += [str(c.arguments.get("text", "")) for c in calls if c.name == "say" and c.arguments.get("text")]
    others = tuple(c for c in calls if c.name != "say")
    update = HighLevelUpdate(
        subtask=fields.get("subtask"),
        plan=fields.get("plan"),
        memory=fields.get("memory"),
        answer=fields.get("answer"),
        speech=" ".join(speech) or None,
        tool_calls=others,
        task_done=bool(reply.get("task_done", False)),
    )
    if update == HighLevelUpdate() and not reply.get("task_done"):
        raise ParseError(f"the reply holds none of {', '.join(REPLY_FIELDS)}: {dict(reply)!r}"[:300])
    return update


def parse_generation(text: str, *, default_field: str = "subtask") -> HighLevelUpdate:
    """Generated text as an update (see the module docstring for the accepted shapes)."""
    stripped = text.strip()
    if not stripped:
        raise ParseError("the model generated no text")
    if stripped.startswith("{"):
        try:
            decoded = json.loads(stripped)
        except ValueError:
            decoded = None
        if isinstance(decoded, Mapping):
            return parse_reply(decoded)
    rest, speech = split_say(stripped)
    fields: dict[str, list[str]] = {}
    current: str | None = None
    loose: list[str] = []
    for line in rest.splitlines():
        match = _LABEL.match(line)
        if match:
            current = match.group(1).lower()
            current = "speech" if current == "say" else current
            fields.setdefault(current, [])
            if match.group(2).strip():
                fields[current].append(match.group(2).strip())
        elif current is not None and line.strip():
            fields[current].append(line.strip())
        elif line.strip():
            loose.append(line.strip())
    if loose:
        fields.setdefault(default_field, []).extend(loose)
    values = {k: "\n".join(v) if k == "plan" else " ".join(v) for k, v in fields.items()}
    if "speech" in values:
        speech.insert(0, values.pop("speech"))
    if default_field == "speech" and not values and not speech:
        raise ParseError("the model generated no text")
    return HighLevelUpdate(
        subtask=values.get("subtask"),
        plan=values.get("plan"),
        memory=values.get("memory"),
        answer=values.get("answer"),
        speech=" ".join(s for s in speech if s) or None,
    )
