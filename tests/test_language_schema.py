"""The language schema: Arrow types, styles, row conversions (all on-disk variants), tool catalog."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from steerable.errors import LanguageSchemaError
from steerable.language import (
    DEFAULT_TOOLS,
    EVENT_ONLY_STYLES,
    EVENT_ROW_FIELDS,
    PERSISTENT_ROW_FIELDS,
    PERSISTENT_STYLES,
    ROLES,
    SAY_TOOL,
    STYLE_REGISTRY,
    VIEW_DEPENDENT_STYLES,
    EventRow,
    PersistentRow,
    column_for_style,
    event_row_type,
    event_rows_from_arrow,
    events_array,
    events_column_type,
    is_view_dependent_style,
    json_type,
    language_feature_info,
    language_hf_features,
    merge_tools,
    persistent_array,
    persistent_column_type,
    persistent_row_type,
    persistent_rows_from_arrow,
    rows_from_arrow,
    sort_events,
    sort_persistent,
    speech_row,
    tool_schema,
    tools_from_info,
    validate_camera_field,
)


def _parquet_round_trip(table: pa.Table, path: Path) -> pa.Table:
    pq.write_table(table, path)
    return pq.read_table(path)


# -- Arrow types ------------------------------------------------------------------------------


def test_row_structs_have_the_lerobot_fields_in_order_with_float32_timestamp() -> None:
    persistent, event = persistent_row_type(), event_row_type()
    assert [f.name for f in persistent] == list(PERSISTENT_ROW_FIELDS)
    assert [f.name for f in event] == list(EVENT_ROW_FIELDS)
    assert PERSISTENT_ROW_FIELDS == ("role", "content", "style", "timestamp", "camera", "tool_calls")
    assert EVENT_ROW_FIELDS == ("role", "content", "style", "camera", "tool_calls")
    assert persistent.field("timestamp").type == pa.float32()
    # Only role and the persistent timestamp are required.
    assert [f.name for f in persistent if not f.nullable] == ["role", "timestamp"]
    assert [f.name for f in event if not f.nullable] == ["role"]
    assert persistent.field("tool_calls").type == pa.list_(json_type())
    assert persistent_column_type() == pa.list_(persistent)
    assert events_column_type() == pa.list_(event)


def test_json_element_is_the_arrow_json_type_when_available() -> None:
    expected = pa.json_() if hasattr(pa, "json_") else pa.string()
    assert json_type() == expected


def test_language_feature_info_declares_both_columns() -> None:
    assert language_feature_info() == {
        "language_persistent": {"dtype": "language", "shape": [1], "names": None},
        "language_events": {"dtype": "language", "shape": [1], "names": None},
    }
    info = language_feature_info()
    info["language_events"]["shape"].append(2)
    assert language_feature_info()["language_events"]["shape"] == [1], "callers get fresh dicts"


def test_hf_features_describe_list_of_row_structs() -> None:
    features = language_hf_features()
    persistent = features["language_persistent"]
    assert persistent["_type"] == "List"
    assert list(persistent["feature"]) == list(PERSISTENT_ROW_FIELDS)
    assert persistent["feature"]["timestamp"] == {"dtype": "float32", "_type": "Value"}
    assert persistent["feature"]["tool_calls"]["_type"] == "List"
    assert list(features["language_events"]["feature"]) == list(EVENT_ROW_FIELDS)


def test_canonical_types_survive_a_parquet_round_trip(tmp_path: Path) -> None:
    table = pa.table(
        {
            "language_persistent": persistent_array(
                [[{"role": "assistant", "content": "reach", "style": "subtask", "timestamp": 0.0}]]
            ),
            "language_events": events_array([[speech_row("on it")]]),
        }
    )
    back = _parquet_round_trip(table, tmp_path / "t.parquet")
    assert back.schema.field("language_persistent").type == persistent_column_type()
    assert back.schema.field("language_events").type == events_column_type()
    assert back.to_pylist() == table.to_pylist()


# -- styles and camera rule (reference tests 3-7) ---------------------------------------------


def test_style_registry_routes_each_style_to_its_column() -> None:
    assert {"subtask", "plan", "memory", "motion", "task_aug"} == PERSISTENT_STYLES
    assert {"interjection", "vqa", "trace"} == EVENT_ONLY_STYLES
    assert set(STYLE_REGISTRY) >= PERSISTENT_STYLES | EVENT_ONLY_STYLES
    for style in PERSISTENT_STYLES:
        assert column_for_style(style) == "language_persistent"
    for style in EVENT_ONLY_STYLES:
        assert column_for_style(style) == "language_events"
    assert column_for_style(None) == "language_events"


def test_only_vqa_and_trace_are_view_dependent() -> None:
    assert {"vqa", "trace"} == VIEW_DEPENDENT_STYLES
    for style in ("motion", "subtask", "plan", "interjection", None):
        assert not is_view_dependent_style(style)


def test_view_dependent_rows_need_a_camera() -> None:
    validate_camera_field("vqa", "observation.images.top")
    validate_camera_field("trace", "observation.images.wrist")
    with pytest.raises(LanguageSchemaError, match="view-dependent"):
        validate_camera_field("vqa", None)
    with pytest.raises(LanguageSchemaError, match="view-dependent"):
        validate_camera_field("trace", "")


def test_other_rows_must_not_name_a_camera() -> None:
    for style in ("subtask", "plan", "memory", "motion", "interjection", None):
        validate_camera_field(style, None)
    for style in ("subtask", "motion", "interjection", None):
        with pytest.raises(LanguageSchemaError, match="must have camera=None"):
            validate_camera_field(style, "observation.images.top")


def test_unknown_style_is_rejected() -> None:
    with pytest.raises(LanguageSchemaError, match="unknown language style 'surprise'"):
        column_for_style("surprise")


# -- Python <-> Arrow rows ----------------------------------------------------------------------

_text = st.text(max_size=12)
_json_leaf = st.none() | st.booleans() | st.integers(-(2**40), 2**40) | _text
_json_value = st.recursive(
    _json_leaf, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3), max_leaves=6
)
_tool_call = st.fixed_dictionaries(
    {
        "type": st.just("function"),
        "function": st.fixed_dictionaries(
            {"name": st.sampled_from(["say", "wave"]), "arguments": st.dictionaries(_text, _json_value, max_size=3)}
        ),
    }
)
_common = {
    "role": st.sampled_from(sorted(ROLES)),
    "content": st.none() | _text,
    "style": st.none() | st.sampled_from(sorted(STYLE_REGISTRY)),
    "camera": st.none() | st.sampled_from(["observation.images.top", "image"]),
    "tool_calls": st.none() | st.lists(_tool_call, max_size=2),
}
_persistent_row = st.fixed_dictionaries(
    {**_common, "timestamp": st.floats(0, 1e4, width=32, allow_nan=False)}
).map(lambda r: {k: r[k] for k in PERSISTENT_ROW_FIELDS})
_event_row = st.fixed_dictionaries(_common).map(lambda r: {k: r[k] for k in EVENT_ROW_FIELDS})


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    persistent=st.lists(st.lists(_persistent_row, max_size=3), min_size=1, max_size=4),
    events=st.lists(st.lists(_event_row, max_size=3), min_size=1, max_size=4),
)
def test_rows_round_trip_through_arrow_and_parquet(
    tmp_path: Path, persistent: list[list[dict]], events: list[list[dict]]
) -> None:
    n = min(len(persistent), len(events))
    persistent, events = persistent[:n], events[:n]
    table = pa.table({"p": persistent_array(persistent), "e": events_array(events)})
    back = _parquet_round_trip(table, tmp_path / "rows.parquet")
    assert rows_from_arrow(back.column("p")) == persistent
    assert rows_from_arrow(back.column("e")) == events


def test_missing_fields_read_back_as_none_and_timestamps_as_float32() -> None:
    column = persistent_array([[{"role": "assistant", "content": "plan", "style": "plan", "timestamp": 0.1}]])
    (row,) = rows_from_arrow(column)[0]
    assert row == {
        "role": "assistant",
        "content": "plan",
        "style": "plan",
        "timestamp": pytest.approx(0.1, abs=1e-7),
        "camera": None,
        "tool_calls": None,
    }
    assert row["timestamp"] != 0.1, "stored with float32 precision, like the frame timestamps"


def test_row_without_role_cannot_be_built() -> None:
    with pytest.raises(LanguageSchemaError, match="needs a role"):
        events_array([[{"content": "hello"}]])


def test_reads_the_struct_variant_written_by_lerobot(tmp_path: Path) -> None:
    # LeRobot's writer lets pyarrow infer the types: float64 timestamps, tool calls as nested structs,
    # and null-typed lists in shards without events.
    persistent = [
        {"role": "assistant", "content": "grasp", "style": "subtask", "timestamp": 1.5, "camera": None,
         "tool_calls": None},
    ]
    say = {"type": "function", "function": {"name": "say", "arguments": {"text": "ok"}}}
    events = [{"role": "assistant", "content": None, "style": None, "camera": None, "tool_calls": [say]}]
    table = pa.table(
        {"p": pa.array([persistent, persistent]), "e": pa.array([events, []]), "empty": pa.array([[], []])}
    )
    assert table.schema.field("p").type.value_type.field("timestamp").type == pa.float64()
    assert pa.types.is_struct(table.schema.field("e").type.value_type.field("tool_calls").type.value_type)
    back = _parquet_round_trip(table, tmp_path / "lerobot.parquet")
    assert rows_from_arrow(back.column("p")) == [persistent, persistent]
    assert rows_from_arrow(back.column("e")) == [events, []]
    assert rows_from_arrow(back.column("empty")) == [[], []]


def test_reads_plain_string_json_and_keeps_non_json_strings(tmp_path: Path) -> None:
    row_type = pa.struct([("role", pa.string()), ("content", pa.string()), ("style", pa.string()),
                          ("camera", pa.string()), ("tool_calls", pa.list_(pa.string()))])
    call = {"type": "function", "function": {"name": "say", "arguments": {"text": "hé"}}}
    cells = [[{"role": "assistant", "content": None, "style": None, "camera": None,
               "tool_calls": [json.dumps(call), "not json {"]}], None]
    back = _parquet_round_trip(pa.table({"e": pa.array(cells, type=pa.list_(row_type))}), tmp_path / "s.parquet")
    rows = rows_from_arrow(back.column("e"))
    assert rows[0][0]["tool_calls"] == [call, "not json {"]
    assert rows[1] == [], "a null cell reads as no rows"


def test_non_json_string_tool_call_round_trips_as_string() -> None:
    column = events_array([[{"role": "tool", "content": None, "style": None, "tool_calls": ["raw text"]}]])
    assert rows_from_arrow(column)[0][0]["tool_calls"] == ["raw text"]


def test_rows_from_arrow_rejects_a_non_list_column() -> None:
    with pytest.raises(LanguageSchemaError, match="list of row structs"):
        rows_from_arrow(pa.array(["a"]))


def test_speech_row_is_the_say_atom() -> None:
    assert speech_row("Skipping wiping.") == {
        "role": "assistant",
        "content": None,
        "style": None,
        "camera": None,
        "tool_calls": [
            {"type": "function", "function": {"name": "say", "arguments": {"text": "Skipping wiping."}}}
        ],
    }


def test_sorting_orders_by_time_then_style_then_role() -> None:
    rows = [
        {"role": "assistant", "style": "subtask", "timestamp": 1.0},
        {"role": "user", "style": "task_aug", "timestamp": 0.0},
        {"role": "assistant", "style": "memory", "timestamp": 1.0},
        {"role": "assistant", "style": "plan", "timestamp": 0.0},
    ]
    assert [r["style"] for r in sort_persistent(rows)] == ["plan", "task_aug", "memory", "subtask"]
    events = [
        {"role": "user", "style": "vqa", "camera": "b"},
        {"role": "assistant", "style": None},
        {"role": "user", "style": "vqa", "camera": "a"},
        {"role": "assistant", "style": "vqa", "camera": "b"},
        {"role": "user", "style": "interjection"},
    ]
    keys = [(r["style"], r["role"], r.get("camera")) for r in sort_events(events)]
    assert keys == [
        (None, "assistant", None),
        ("interjection", "user", None),
        ("vqa", "assistant", "b"),
        ("vqa", "user", "a"),
        ("vqa", "user", "b"),
    ]


# -- tool catalog -------------------------------------------------------------------------------


def test_say_tool_is_an_openai_function_schema_requiring_text() -> None:
    assert SAY_TOOL["type"] == "function"
    function = SAY_TOOL["function"]
    assert function["name"] == "say"
    assert function["parameters"]["properties"]["text"]["type"] == "string"
    assert function["parameters"]["required"] == ["text"]
    assert DEFAULT_TOOLS == [SAY_TOOL]


def test_tools_from_info_defaults_and_copies() -> None:
    assert tools_from_info({}) == DEFAULT_TOOLS
    assert tools_from_info({"tools": []}) == DEFAULT_TOOLS
    assert tools_from_info({"tools": None}) == DEFAULT_TOOLS
    wave = {"type": "function", "function": {"name": "wave", "parameters": {"type": "object"}}}
    info = {"tools": [wave]}
    tools = tools_from_info(info)
    assert tools == [wave]
    tools[0]["function"]["name"] = "changed"
    assert info["tools"][0]["function"]["name"] == "wave", "the caller's dict is not aliased"
    tools_from_info({})[0]["function"]["name"] = "changed"
    assert SAY_TOOL["function"]["name"] == "say", "the default catalog is not aliased"


def test_merge_tools_keeps_user_tools_and_adds_say_once() -> None:
    wave = {"type": "function", "function": {"name": "wave"}}
    merged = merge_tools([wave], [SAY_TOOL])
    assert merged == [wave, SAY_TOOL]
    assert merge_tools(merged, [SAY_TOOL]) == merged
    custom_say = {"type": "function", "function": {"name": "say", "description": "mine"}}
    assert merge_tools([custom_say], [SAY_TOOL]) == [custom_say], "a user's own `say` is kept"
    assert merge_tools(None, [SAY_TOOL]) == [SAY_TOOL]


def test_tool_schema_looks_up_by_name() -> None:
    assert tool_schema("say") == SAY_TOOL
    wave = {"type": "function", "function": {"name": "wave"}}
    assert tool_schema("wave", [SAY_TOOL, wave]) == wave
    assert tool_schema("wave") is None


def test_typed_readers_give_each_column_its_own_row_type() -> None:
    # PersistentRow and EventRow (TypedDicts) are what a reader of one column gets; the column of the
    # other kind is refused by name instead of read as the wrong rows.
    persistent = persistent_array([[{"role": "assistant", "content": "plan", "style": "plan", "timestamp": 0.5}]])
    events = events_array([[speech_row("on it")], None])
    (row,) = persistent_rows_from_arrow(persistent)[0]
    assert list(row) == list(PERSISTENT_ROW_FIELDS) and row["timestamp"] == 0.5
    assert list(PersistentRow.__annotations__) == list(EventRow.__annotations__) + ["timestamp"]
    assert set(EventRow.__annotations__) == set(EVENT_ROW_FIELDS)
    said = event_rows_from_arrow(events)
    assert said[1] == [] and said[0][0]["tool_calls"] == speech_row("on it")["tool_calls"]
    with pytest.raises(LanguageSchemaError, match="language_events column has no timestamp"):
        event_rows_from_arrow(persistent)
    with pytest.raises(LanguageSchemaError, match="language_persistent column needs rows with a timestamp"):
        persistent_rows_from_arrow(events)
