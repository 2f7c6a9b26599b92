"""Arrow types of the two language columns, and their info.json / HF `datasets` feature entries.

Field order and nullability match LeRobot's on-disk contract exactly. The `tool_calls` elements are
JSON text: the Arrow JSON extension type (`pa.json_()`) when pyarrow has it, plain strings otherwise.
The extension type round-trips through Parquet as a string column with the JSON logical type, so
readers without the extension (older pyarrow, other tools) still see strings.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from steerable.language.styles import LANGUAGE_EVENTS, LANGUAGE_PERSISTENT

__all__ = [
    "EVENT_ROW_FIELDS",
    "HAS_ARROW_JSON",
    "PERSISTENT_ROW_FIELDS",
    "event_row_type",
    "events_column_type",
    "json_type",
    "language_feature_info",
    "language_hf_features",
    "persistent_column_type",
    "persistent_row_type",
    "storage_column_type",
]

PERSISTENT_ROW_FIELDS: tuple[str, ...] = ("role", "content", "style", "timestamp", "camera", "tool_calls")
EVENT_ROW_FIELDS: tuple[str, ...] = ("role", "content", "style", "camera", "tool_calls")

HAS_ARROW_JSON: bool = hasattr(pa, "json_")


def json_type() -> pa.DataType:
    """The element type of `tool_calls`: Arrow JSON when available, else string."""
    return pa.json_() if HAS_ARROW_JSON else pa.string()


def _row_type(*, with_timestamp: bool, element: pa.DataType) -> pa.StructType:
    fields = [
        pa.field("role", pa.string(), nullable=False),
        pa.field("content", pa.string()),
        pa.field("style", pa.string()),
    ]
    if with_timestamp:
        fields.append(pa.field("timestamp", pa.float32(), nullable=False))
    fields += [pa.field("camera", pa.string()), pa.field("tool_calls", pa.list_(element))]
    return pa.struct(fields)


def persistent_row_type() -> pa.StructType:
    """One persistent row: role, content, style, timestamp (float32), camera, tool_calls."""
    return _row_type(with_timestamp=True, element=json_type())


def event_row_type() -> pa.StructType:
    """One event row: like a persistent row without timestamp (the frame gives the time)."""
    return _row_type(with_timestamp=False, element=json_type())


def persistent_column_type() -> pa.ListType:
    return pa.list_(persistent_row_type())


def events_column_type() -> pa.ListType:
    return pa.list_(event_row_type())


def storage_column_type(column_type: pa.ListType) -> pa.ListType:
    """`column_type` with JSON elements replaced by strings: what `pa.array` can build from Python."""
    row = column_type.value_type
    fields = []
    for field in row:
        if field.name == "tool_calls":
            field = field.with_type(pa.list_(pa.string()))
        fields.append(field)
    return pa.list_(pa.struct(fields))


def language_feature_info() -> dict[str, dict[str, Any]]:
    """The two `meta/info.json` feature entries that declare the language columns."""
    return {
        LANGUAGE_PERSISTENT: {"dtype": "language", "shape": [1], "names": None},
        LANGUAGE_EVENTS: {"dtype": "language", "shape": [1], "names": None},
    }


def _hf_value(dtype: str) -> dict[str, str]:
    return {"dtype": dtype, "_type": "Value"}


def _hf_row(*, with_timestamp: bool) -> dict[str, Any]:
    element = {"_type": "Json"} if HAS_ARROW_JSON else _hf_value("string")
    row: dict[str, Any] = {
        "role": _hf_value("string"),
        "content": _hf_value("string"),
        "style": _hf_value("string"),
    }
    if with_timestamp:
        row["timestamp"] = _hf_value("float32")
    row["camera"] = _hf_value("string")
    row["tool_calls"] = {"feature": element, "_type": "List"}
    return row


def language_hf_features() -> dict[str, dict[str, Any]]:
    """The two columns in HF `datasets` serialized form, for a shard's `huggingface` schema metadata."""
    return {
        LANGUAGE_PERSISTENT: {"feature": _hf_row(with_timestamp=True), "_type": "List"},
        LANGUAGE_EVENTS: {"feature": _hf_row(with_timestamp=False), "_type": "List"},
    }
