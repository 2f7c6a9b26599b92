"""Python language rows (typed dicts) and their conversions to and from Arrow arrays of the canonical types.

In Python a row is a `PersistentRow` or an `EventRow` (the fields of `PERSISTENT_ROW_FIELDS` or
`EVENT_ROW_FIELDS`), and `tool_calls` is a list of `ToolCall` dicts
(`{"type": "function", "function": {"name", "arguments": {...}}}`). On disk each tool call is JSON
text. Reading accepts every variant found in the wild: canonical JSON elements, plain JSON strings,
and the nested structs (with float64 timestamps) that LeRobot's own writer produces by letting
pyarrow infer the types.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypedDict, TypeVar, cast

import numpy as np
import pyarrow as pa

from steerable.errors import LanguageSchemaError
from steerable.language.schema import (
    EVENT_ROW_FIELDS,
    PERSISTENT_ROW_FIELDS,
    events_column_type,
    persistent_column_type,
    storage_column_type,
)

__all__ = [
    "EventRow",
    "PersistentRow",
    "Row",
    "RowIn",
    "ToolCall",
    "ToolFunction",
    "checked_event_row",
    "checked_persistent_row",
    "event_row",
    "event_rows_from_arrow",
    "events_array",
    "event_sort_key",
    "persistent_array",
    "persistent_row",
    "persistent_rows_from_arrow",
    "persistent_sort_key",
    "rows_from_arrow",
    "sort_events",
    "sort_persistent",
    "speech_row",
    "to_float32",
]


class ToolFunction(TypedDict):
    """The function a tool call names, and its JSON arguments."""

    name: str
    arguments: dict[str, Any]  # JSON: the tool's own argument schema says what is in it


class ToolCall(TypedDict):
    """One tool call: `{"type": "function", "function": {"name": ..., "arguments": {...}}}`."""

    type: str
    function: ToolFunction


class EventRow(TypedDict):
    """One row of `language_events`: its time is the frame's, not a field."""

    role: str
    content: str | None
    style: str | None
    camera: str | None
    # A call stored as text that is not JSON comes back as that text (`validate_rows` reports it).
    tool_calls: list[ToolCall | str] | None


class PersistentRow(EventRow):
    """One row of `language_persistent`: an event row plus the time it starts to hold (float32)."""

    timestamp: float


Row = PersistentRow | EventRow  # a row of either column, as read back
# A row before `validate_rows` checked it (a client's JSON, a writer's input): any keys, any values.
RowIn = Mapping[str, object]
R = TypeVar("R", bound=Mapping[str, Any])


def to_float32(value: float) -> float:
    """`value` rounded to float32, as a Python float: the precision timestamps are stored with."""
    return float(np.float32(value))


def event_row(
    *,
    role: str,
    content: str | None,
    style: str | None,
    camera: str | None = None,
    tool_calls: list[ToolCall | str] | None = None,
) -> EventRow:
    """An event row with every field of `language_events` (its time is the frame's, kept beside it)."""
    return {"role": role, "content": content, "style": style, "camera": camera, "tool_calls": tool_calls}


def persistent_row(
    *,
    role: str,
    content: str | None,
    style: str | None,
    timestamp: float,
    camera: str | None = None,
    tool_calls: list[ToolCall | str] | None = None,
) -> PersistentRow:
    """A persistent row with every field of `language_persistent`, holding from `timestamp` on."""
    return {
        "role": role,
        "content": content,
        "style": style,
        "timestamp": timestamp,
        "camera": camera,
        "tool_calls": tool_calls,
    }


def speech_row(text: str) -> EventRow:
    """The `say` atom: an assistant event row whose only payload is a call to the `say` tool."""
    call: ToolCall = {"type": "function", "function": {"name": "say", "arguments": {"text": text}}}
    return event_row(role="assistant", content=None, style=None, tool_calls=[call])


def checked_event_row(row: RowIn) -> EventRow:
    """The event row `validate_rows` passed, typed: its column's fields only (an absent one None)."""
    # validate_rows passed: every field holds its column's type.
    return cast(EventRow, {name: row.get(name) for name in EVENT_ROW_FIELDS})


def checked_persistent_row(row: RowIn) -> PersistentRow:
    """The persistent row `validate_rows` passed, typed: its column's fields only (an absent one None)."""
    return cast(PersistentRow, {name: row.get(name) for name in PERSISTENT_ROW_FIELDS})


def persistent_sort_key(row: Mapping[str, Any]) -> tuple[float, str, str]:
    """Sort key of persistent rows: (timestamp as stored, style or "", role or "")."""
    return (to_float32(row.get("timestamp") or 0.0), row.get("style") or "", row.get("role") or "")


def event_sort_key(row: Mapping[str, Any]) -> tuple[str, str, str]:
    """Sort key of the event rows sharing one frame: (style or "", role or "", camera or "")."""
    return (row.get("style") or "", row.get("role") or "", row.get("camera") or "")


def sort_persistent(rows: Iterable[R]) -> list[R]:
    return sorted(rows, key=persistent_sort_key)


def sort_events(rows: Iterable[R]) -> list[R]:
    return sorted(rows, key=event_sort_key)


def _encode_tool_call(call: Any) -> str:
    # A string is kept verbatim: it is either JSON already or the "string fallback".
    if isinstance(call, str):
        return call
    return json.dumps(call, ensure_ascii=False, separators=(",", ":"))


def _storage_row(row: Mapping[str, Any], fields: tuple[str, ...]) -> dict[str, Any]:
    if row.get("role") is None:
        raise LanguageSchemaError(f"a language row needs a role; got {dict(row)!r}")
    out = {name: row.get(name) for name in fields}
    if "timestamp" in out:
        if out["timestamp"] is None:
            raise LanguageSchemaError(f"a persistent language row needs a timestamp; got {dict(row)!r}")
        out["timestamp"] = float(out["timestamp"])
    calls = out["tool_calls"]
    if calls is not None:
        out["tool_calls"] = [_encode_tool_call(call) for call in calls]
    return out


def _build(
    row_lists: Sequence[Sequence[Mapping[str, Any]] | None], column_type: pa.ListType, fields: tuple[str, ...]
) -> pa.Array:
    # Rows go to Arrow as one flat struct array plus list offsets: most event cells are empty,
    # and converting a Python list per cell would dominate the cost of writing a shard.
    flat = [_storage_row(row, fields) for rows in row_lists if rows for row in rows]
    counts = np.fromiter((len(rows) if rows else 0 for rows in row_lists), dtype=np.int32, count=len(row_lists))
    offsets = np.zeros(len(row_lists) + 1, dtype=np.int32)
    np.cumsum(counts, out=offsets[1:])
    storage = storage_column_type(column_type)
    values = pa.array(flat, type=storage.value_type)
    array = pa.ListArray.from_arrays(pa.array(offsets), values, type=storage)
    # pa.array cannot build the JSON extension type from Python objects; a cast of the string
    # storage is zero-copy and gives the canonical type.
    return array if storage == column_type else array.cast(column_type)


def persistent_array(row_lists: Sequence[Sequence[Mapping[str, Any]] | None]) -> pa.Array:
    """One `language_persistent` cell per item, in the given order (rows are not re-sorted)."""
    return _build(row_lists, persistent_column_type(), PERSISTENT_ROW_FIELDS)


def events_array(row_lists: Sequence[Sequence[Mapping[str, Any]] | None]) -> pa.Array:
    """One `language_events` cell per item, in the given order (rows are not re-sorted)."""
    return _build(row_lists, events_column_type(), EVENT_ROW_FIELDS)


def _decode_tool_call(call: Any) -> Any:
    if isinstance(call, str):
        try:
            return json.loads(call)
        except ValueError:
            return call  # not JSON: handed back as the string it is
    return call


def _event_row(raw: Mapping[str, Any]) -> EventRow:
    calls = raw.get("tool_calls")
    role: Any = raw.get("role")  # a null role is kept as read: validate_rows reports it
    return {
        "role": role,
        "content": raw.get("content"),
        "style": raw.get("style"),
        "camera": raw.get("camera"),
        "tool_calls": None if calls is None else [_decode_tool_call(call) for call in calls],
    }


def _persistent_row(raw: Mapping[str, Any]) -> PersistentRow:
    row = _event_row(raw)
    stamp = raw.get("timestamp")
    timestamp: Any = None if stamp is None else to_float32(stamp)  # a null one is kept: validate_rows reports it
    # The fields in the schema's order (timestamp before camera), as rows have always been read.
    return {
        "role": row["role"],
        "content": row["content"],
        "style": row["style"],
        "timestamp": timestamp,
        "camera": row["camera"],
        "tool_calls": row["tool_calls"],
    }


def _cells(column: pa.Array | pa.ChunkedArray) -> tuple[bool, list[Any]]:
    """(whether the rows are persistent ones, the raw cells) of a language column, whatever its on-disk variant."""
    value_type = column.type.value_type if pa.types.is_list(column.type) else None
    if value_type is None and not pa.types.is_null(column.type):
        raise LanguageSchemaError(f"a language column must be a list of row structs; got type {column.type}")
    has_timestamp = value_type is not None and pa.types.is_struct(value_type) and (
        value_type.get_field_index("timestamp") >= 0
    )
    return has_timestamp, column.to_pylist()


def persistent_rows_from_arrow(column: pa.Array | pa.ChunkedArray) -> list[list[PersistentRow]]:
    """The rows of every cell of a `language_persistent` column; null cells give []."""
    persistent, cells = _cells(column)
    if not persistent and any(cells):
        raise LanguageSchemaError("a language_persistent column needs rows with a timestamp; these have none")
    return [[_persistent_row(raw) for raw in cell if raw is not None] if cell else [] for cell in cells]


def event_rows_from_arrow(column: pa.Array | pa.ChunkedArray) -> list[list[EventRow]]:
    """The rows of every cell of a `language_events` column; null cells give []."""
    persistent, cells = _cells(column)
    if persistent:
        raise LanguageSchemaError("a language_events column has no timestamp field; these rows have one")
    return [[_event_row(raw) for raw in cell if raw is not None] if cell else [] for cell in cells]


def rows_from_arrow(column: pa.Array | pa.ChunkedArray) -> list[list[dict[str, Any]]]:
    """The rows of every cell of either language column (told apart by the timestamp field); null cells give [].

    Plain dicts, for code that handles the cells of either column alike (the writer's untouched cells,
    lint); a reader of one column takes its typed rows from `persistent_rows_from_arrow` or
    `event_rows_from_arrow`.
    """
    persistent, cells = _cells(column)
    build = _persistent_row if persistent else _event_row
    return [[_plain(build(raw)) for raw in cell if raw is not None] if cell else [] for cell in cells]


def _plain(row: Row) -> dict[str, Any]:
    return {**row}
