"""Check language rows against every schema rule at once, so a user sees all problems in one go."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from steerable.errors import LanguageSchemaError
from steerable.language.schema import EVENT_ROW_FIELDS, PERSISTENT_ROW_FIELDS
from steerable.language.styles import (
    LANGUAGE_EVENTS,
    LANGUAGE_PERSISTENT,
    STYLE_REGISTRY,
    column_for_style,
    validate_camera_field,
)

__all__ = ["ROLES", "Problem", "raise_for_problems", "validate_rows"]

ROLES: frozenset[str] = frozenset({"user", "assistant", "system", "tool"})


@dataclass(frozen=True)
class Problem:
    """One broken rule: `where` locates the row (e.g. "persistent[3]", "events[t=1.2333][0]")."""

    where: str
    message: str

    def __str__(self) -> str:
        return f"{self.where}: {self.message}"


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)


def _time_label(t: Any) -> str:
    return str(np.float32(t)) if _is_number(t) else repr(t)


def _tool_call_problems(calls: Any) -> list[str]:
    if not isinstance(calls, list):
        return [f"tool_calls must be a list of tool calls, got {type(calls).__name__}"]
    found = []
    for i, call in enumerate(calls):
        function = call.get("function") if isinstance(call, Mapping) else None
        if not isinstance(call, Mapping) or call.get("type") != "function" or not isinstance(function, Mapping):
            found.append(
                f"tool_calls[{i}] must look like {{'type': 'function', 'function': {{'name': ..., "
                f"'arguments': {{...}}}}}}, got {call!r}"
            )
            continue
        name, arguments = function.get("name"), function.get("arguments")
        if not isinstance(name, str) or not name:
            found.append(f"tool_calls[{i}].function.name must be a non-empty string, got {name!r}")
        if not isinstance(arguments, Mapping):
            found.append(f"tool_calls[{i}].function.arguments must be a dict, got {arguments!r}")
        elif name == "say" and not isinstance(arguments.get("text"), str):
            found.append(f"tool_calls[{i}] calls 'say' without a string 'text' argument")
    return found


def _row_problems(row: Any, column: str, cameras: frozenset[str] | None) -> list[str]:
    """Rules shared by persistent and event rows (everything but time)."""
    if not isinstance(row, Mapping):
        return [f"a language row must be a dict, got {type(row).__name__}"]
    found = []
    allowed = PERSISTENT_ROW_FIELDS if column == LANGUAGE_PERSISTENT else EVENT_ROW_FIELDS
    unknown = sorted(str(key) for key in row if key not in allowed)
    if unknown:
        hint = " (an event's time is given beside the row, not in it)" if unknown == ["timestamp"] else ""
        found.append(f"unknown field(s) {unknown}; allowed: {list(allowed)}{hint}")
    role = row.get("role")
    if role is None:
        found.append("role is missing")
    elif not isinstance(role, str) or role not in ROLES:
        found.append(f"role {role!r} is not one of {sorted(ROLES)}")
    for key in ("content", "style", "camera"):
        if row.get(key) is not None and not isinstance(row[key], str):
            found.append(f"{key} must be a string or None, got {type(row[key]).__name__}")
    style, calls = row.get("style"), row.get("tool_calls")
    if isinstance(style, str) and style not in STYLE_REGISTRY:
        found.append(f"unknown style {style!r}; known styles: {', '.join(STYLE_REGISTRY)}")
    elif style is None or isinstance(style, str):
        try:
            if column_for_style(style) != column:
                found.append(f"style {style!r} belongs in {column_for_style(style)}, not {column}")
        except LanguageSchemaError as exc:
            found.append(str(exc))
    if row.get("content") is None and not calls:
        found.append("row has neither content nor tool_calls")
    elif style is None and not calls:
        found.append("a row without a style must carry tool_calls")
    if calls is not None:
        found += _tool_call_problems(calls)
    camera = row.get("camera")
    try:
        validate_camera_field(style, camera)
    except LanguageSchemaError as exc:
        found.append(str(exc))
    if cameras is not None and isinstance(camera, str) and camera and camera not in cameras:
        found.append(f"camera {camera!r} is not a camera of this dataset {sorted(cameras)}")
    return found


def _time_problems(t: Any, frames: frozenset[float] | None, what: str) -> list[str]:
    if not _is_number(t):
        return [f"{what} must be a number, got {t!r}"]
    if not math.isfinite(float(t)):
        return [f"{what} {t!r} is not finite"]
    if t < 0:
        return [f"{what} {t!r} is negative"]
    if frames is not None and float(np.float32(t)) not in frames:
        return [f"{what} {_time_label(t)} matches no frame timestamp of the episode exactly (as float32)"]
    return []


def validate_rows(
    persistent: Sequence[Any],
    events: Sequence[tuple[Any, Any]],
    *,
    frame_timestamps: Iterable[float] | None = None,
    cameras: Iterable[str] | None = None,
) -> list[Problem]:
    """Every rule `persistent` rows and `(emission time, row)` events break; [] when all is well.

    With `frame_timestamps` (the episode's stored frame times), persistent and event times must equal
    one of them exactly in float32; with `cameras`, camera fields must name one of them.
    """
    frames = (
        frozenset(np.asarray(list(frame_timestamps), dtype=np.float32).tolist())
        if frame_timestamps is not None
        else None
    )
    camera_set = frozenset(cameras) if cameras is not None else None
    problems: list[Problem] = []
    for i, row in enumerate(persistent):
        where = f"persistent[{i}]"
        found = _row_problems(row, LANGUAGE_PERSISTENT, camera_set)
        if isinstance(row, Mapping):
            if row.get("timestamp") is None:
                found.append("timestamp is missing")
            else:
                found += _time_problems(row["timestamp"], frames, "timestamp")
        problems += [Problem(where, message) for message in found]

    seen_at: dict[str, int] = defaultdict(int)
    vqa_keys: dict[tuple[str, Any, Any], int] = defaultdict(int)
    for i, item in enumerate(events):
        if not isinstance(item, (tuple, list)) or len(item) != 2:
            problems.append(Problem(f"events[{i}]", f"an event must be a (time, row) pair, got {item!r}"))
            continue
        t, row = item
        label = _time_label(t)
        where = f"events[t={label}][{seen_at[label]}]"
        seen_at[label] += 1
        found = _time_problems(t, frames, "event time")
        found += _row_problems(row, LANGUAGE_EVENTS, camera_set)
        if isinstance(row, Mapping) and row.get("style") == "vqa":
            key = (label, row.get("role"), row.get("camera"))
            vqa_keys[key] += 1
            if vqa_keys[key] == 2:
                found.append(
                    f"more than one vqa row with role {key[1]!r} and camera {key[2]!r} at this time; "
                    "keep one question and one answer per camera"
                )
        problems += [Problem(where, message) for message in found]
    return problems


def raise_for_problems(problems: Sequence[Problem]) -> None:
    """Raise LanguageSchemaError naming every problem (first line: count and the first one; then one line
    each, as in its `problems`)."""
    if not problems:
        return
    count = len(problems)
    noun = "problem" if count == 1 else "problems"
    lines = [f"{count} {noun} in language rows (first: {problems[0]}); fix them and retry"]
    lines += [f"  {problem}" for problem in problems]
    raise LanguageSchemaError("\n".join(lines), problems=[str(problem) for problem in problems])
