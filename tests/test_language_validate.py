"""validate_rows reports every broken schema rule, each located; raise_for_problems lists them all."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from steerable.errors import LanguageSchemaError
from steerable.language import Problem, raise_for_problems, speech_row, validate_rows

TOP, WRIST = "observation.images.top", "observation.images.wrist"
FRAMES = np.arange(10, dtype=np.float32) / np.float32(30)  # what a 30 fps recorder stores


def subtask(t: float, text: str = "reach") -> dict[str, Any]:
    return {"role": "assistant", "content": text, "style": "subtask", "timestamp": t, "camera": None,
            "tool_calls": None}


def vqa(role: str, camera: str, content: str = "?") -> dict[str, Any]:
    return {"role": role, "content": content, "style": "vqa", "camera": camera, "tool_calls": None}


def messages(problems: list[Problem]) -> list[str]:
    return [str(p) for p in problems]


def only(problems: list[Problem]) -> Problem:
    assert len(problems) == 1, messages(problems)
    return problems[0]


def test_valid_rows_have_no_problems() -> None:
    t = float(FRAMES[3])
    events = [
        (t, {"role": "user", "content": "skip wiping", "style": "interjection", "camera": None, "tool_calls": None}),
        (t, speech_row("Skipping wiping.")),
        (t, vqa("user", TOP)),
        (t, vqa("assistant", TOP, '{"count": 2}')),
        (t, vqa("user", WRIST)),
    ]
    persistent = [subtask(0.0), subtask(t, "grasp"), {"role": "user", "content": "do it", "style": "task_aug",
                                                       "timestamp": 0.0}]
    assert validate_rows(persistent, events, frame_timestamps=FRAMES, cameras=[TOP, WRIST]) == []


def test_unknown_style() -> None:
    problem = only(validate_rows([{**subtask(0.0), "style": "surprise"}], []))
    assert problem.where == "persistent[0]"
    assert "unknown style 'surprise'" in problem.message


def test_style_in_the_wrong_column() -> None:
    wrong_event = {"role": "assistant", "content": "plan", "style": "plan", "camera": None, "tool_calls": None}
    problems = validate_rows([{**subtask(0.0), "style": "interjection"}], [(0.0, wrong_event)])
    assert "belongs in language_events" in problems[0].message
    assert problems[1].where == "events[t=0.0][0]"
    assert "belongs in language_persistent" in problems[1].message


def test_role_missing_or_unknown() -> None:
    problems = validate_rows([{**subtask(0.0), "role": None}, {**subtask(0.0), "role": "robot"}], [])
    assert [p.where for p in problems] == ["persistent[0]", "persistent[1]"]
    assert "role is missing" in problems[0].message
    assert "'robot' is not one of" in problems[1].message


def test_neither_content_nor_tool_calls() -> None:
    empty = {"role": "user", "content": None, "style": "interjection", "camera": None, "tool_calls": None}
    assert "neither content nor tool_calls" in only(validate_rows([], [(0.0, empty)])).message


def test_style_none_needs_tool_calls() -> None:
    talk = {"role": "assistant", "content": "hello", "style": None, "camera": None, "tool_calls": None}
    assert "without a style must carry tool_calls" in only(validate_rows([], [(0.0, talk)])).message


def test_camera_rule_both_ways() -> None:
    problems = validate_rows([{**subtask(0.0), "camera": TOP}], [(0.0, vqa("user", ""))])
    assert "must have camera=None" in problems[0].message
    assert "view-dependent" in problems[1].message


def test_camera_must_be_one_of_the_dataset_cameras() -> None:
    problem = only(validate_rows([], [(0.0, vqa("user", "observation.images.side"))], cameras=[TOP, WRIST]))
    assert "'observation.images.side' is not a camera of this dataset" in problem.message
    assert validate_rows([], [(0.0, vqa("user", "observation.images.side"))]) == [], "no cameras: not checked"


@pytest.mark.parametrize(
    ("calls", "fragment"),
    [
        ("say hi", "must be a list"),
        (["say hi"], "must look like"),
        ([{"type": "call", "function": {"name": "say", "arguments": {"text": "x"}}}], "must look like"),
        ([{"type": "function", "function": {"name": "", "arguments": {}}}], "non-empty string"),
        ([{"type": "function", "function": {"name": "wave", "arguments": '{"hand": "left"}'}}], "must be a dict"),
        ([{"type": "function", "function": {"name": "say", "arguments": {"words": "x"}}}], "string 'text'"),
    ],
)
def test_malformed_tool_calls(calls: Any, fragment: str) -> None:
    row = {"role": "assistant", "content": None, "style": None, "camera": None, "tool_calls": calls}
    assert fragment in only(validate_rows([], [(0.0, row)])).message


def test_event_time_must_equal_a_frame_timestamp_in_float32() -> None:
    t = float(FRAMES[1])  # 1/30 as stored
    assert validate_rows([], [(1 / 30, speech_row("a"))], frame_timestamps=FRAMES) == [], "float64 1/30 -> ok"
    assert validate_rows([], [(t, speech_row("a"))], frame_timestamps=FRAMES) == []
    problem = only(validate_rows([], [(t + 1e-4, speech_row("a"))], frame_timestamps=FRAMES))
    assert "matches no frame timestamp" in problem.message
    assert problem.where.startswith("events[t=0.0334")
    assert validate_rows([], [(t + 1e-4, speech_row("a"))]) == [], "without frames: not checked"


def test_persistent_timestamp_off_frame() -> None:
    problem = only(validate_rows([subtask(0.05)], [], frame_timestamps=FRAMES))
    assert problem.where == "persistent[0]"
    assert "matches no frame timestamp" in problem.message


def test_duplicate_vqa_role_and_camera_at_one_time() -> None:
    events = [(0.0, vqa("user", TOP, "a?")), (0.0, vqa("user", TOP, "b?")), (0.0, vqa("user", WRIST)),
              (1.0, vqa("user", TOP))]
    problem = only(validate_rows([], events))
    assert problem.where == "events[t=0.0][1]"
    assert "more than one vqa row" in problem.message


@pytest.mark.parametrize(("t", "fragment"), [(float("nan"), "not finite"), (float("inf"), "not finite"),
                                             (-0.5, "negative"), ("1.0", "must be a number")])
def test_bad_times(t: Any, fragment: str) -> None:
    assert fragment in only(validate_rows([subtask(t)], [])).message
    assert fragment in only(validate_rows([], [(t, speech_row("x"))])).message


def test_persistent_row_without_timestamp() -> None:
    row = subtask(0.0)
    del row["timestamp"]
    assert "timestamp is missing" in only(validate_rows([row], [])).message


def test_unknown_fields_and_wrong_types() -> None:
    event = {**speech_row("x"), "timestamp": 0.0}
    assert "beside the row" in only(validate_rows([], [(0.0, event)])).message
    problems = validate_rows([{**subtask(0.0), "content": 3}, "not a row"], [])
    assert "content must be a string" in problems[0].message
    assert problems[1].where == "persistent[1]" and "must be a dict" in problems[1].message


def test_every_problem_is_reported_not_just_the_first() -> None:
    bad = {"role": "robot", "content": None, "style": "vqa", "camera": None, "tool_calls": None, "extra": 1}
    problems = validate_rows([subtask(-1.0)], [(0.5, bad)], frame_timestamps=FRAMES, cameras=[TOP])
    text = "\n".join(messages(problems))
    for fragment in ("negative", "unknown field(s) ['extra']", "'robot'", "neither content", "view-dependent",
                     "matches no frame"):
        assert fragment in text
    assert len(problems) == 6


def test_raise_for_problems_lists_all_with_a_summary_first_line() -> None:
    raise_for_problems([])
    problems = validate_rows([{**subtask(0.0), "style": "surprise"}, {**subtask(0.0), "role": None}], [])
    with pytest.raises(LanguageSchemaError) as info:
        raise_for_problems(problems)
    first, *rest = str(info.value).splitlines()
    assert first.startswith("2 problems in language rows") and "persistent[0]" in first
    assert len(rest) == 2 and "persistent[1]: role is missing" in rest[1]


def test_event_that_is_not_a_time_row_pair() -> None:
    problem = only(validate_rows([], [speech_row("x")]))
    assert problem.where == "events[0]" and "(time, row) pair" in problem.message
