"""Find the JSON value inside a model's reply text, repairing the slips models commonly make.

Handled: `<think>` blocks, Markdown code fences, prose around the value, trailing commas, and
Python-style literals. Truncated JSON is *not* completed: a cut-off string would silently become
wrong data, so it is reported (and the call retried) instead.
"""

from __future__ import annotations

import json
import re
from typing import Any

from steerable.errors import VLMError

__all__ = ["ReplyParseError", "extract_json"]

_THINK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"```[a-zA-Z0-9_-]*\s*\n?(.*?)```", re.DOTALL)
_PY_LITERALS = {"True": "true", "False": "false", "None": "null"}
_NOTHING = object()  # "no value found": None is a valid JSON value


class ReplyParseError(VLMError, ValueError):
    """The reply holds no parseable JSON value; `kind` is 'empty', 'truncated' or 'invalid_json'."""

    def __init__(self, message: str, kind: str) -> None:
        super().__init__(message)
        self.kind = kind


def extract_json(text: str) -> Any:
    """The JSON value in `text`, after stripping thinking, fences and prose; raise ReplyParseError if none."""
    body = _THINK.sub("", text).strip()
    if body.lower().startswith("<think>"):
        raise ReplyParseError("the reply is an unfinished <think> block with no answer", "truncated")
    if not body:
        raise ReplyParseError("the reply is empty", "empty")
    candidates = [m.group(1).strip() for m in _FENCE.finditer(body)] + [body]
    truncated = False
    for candidate in candidates:
        value, cut = _parse_candidate(candidate)
        if value is not _NOTHING:
            return value
        truncated = truncated or cut
    if truncated:
        raise ReplyParseError("the reply's JSON is cut off before it closes", "truncated")
    raise ReplyParseError(f"the reply is not valid JSON: {_preview(body)}", "invalid_json")


def _parse_candidate(text: str) -> tuple[Any, bool]:
    """(value or _NOTHING, whether an opened value never closed) for one candidate text."""
    try:
        return json.loads(text), False
    except json.JSONDecodeError:
        pass
    start = _first_opening(text)
    if start < 0:
        return _NOTHING, False
    end = _matching_close(text, start)
    if end < 0:
        return _NOTHING, True
    snippet = text[start : end + 1]
    for attempt in (snippet, _repair(snippet)):
        try:
            return json.loads(attempt), False
        except json.JSONDecodeError:
            continue
    return _NOTHING, False


def _first_opening(text: str) -> int:
    positions = [i for i in (text.find("{"), text.find("[")) if i >= 0]
    return min(positions) if positions else -1


def _matching_close(text: str, start: int) -> int:
    """Index of the bracket closing the one at `start`, string- and escape-aware; -1 if it never closes."""
    depth = 0
    in_string = False
    escaped = False
    for i in range(start, len(text)):
        ch = text[i]
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
            if depth == 0:
                return i
    return -1


def _repair(snippet: str) -> str:
    """Drop trailing commas and map Python literals to JSON, outside of strings only."""
    out: list[str] = []
    i = 0
    in_string = False
    while i < len(snippet):
        ch = snippet[i]
        if in_string:
            out.append(ch)
            if ch == "\\" and i + 1 < len(snippet):
                out.append(snippet[i + 1])
                i += 1
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
            out.append(ch)
        elif ch == ",":
            rest = snippet[i + 1 :].lstrip()
            if not rest.startswith(("}", "]")):
                out.append(ch)
        else:
            word = re.match(r"[A-Za-z]+", snippet[i:])
            if word and word.group(0) in _PY_LITERALS and (i == 0 or not snippet[i - 1].isalnum()):
                out.append(_PY_LITERALS[word.group(0)])
                i += len(word.group(0))
                continue
            out.append(ch)
        i += 1
    return "".join(out)


def _preview(text: str, limit: int = 120) -> str:
    flat = " ".join(text.split())
    return repr(flat if len(flat) <= limit else flat[:limit] + "...")
