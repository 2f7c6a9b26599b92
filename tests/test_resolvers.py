"""Resolvers on an indexed episode timeline: every rule of the reference, and equality with a plain scan."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from language_rows import row
from steerable.errors import LanguageSchemaError, RecipeError
from steerable.language import speech_row
from steerable.recipes import EMITTED_AT_TOLERANCE_S, EpisodeTimeline, ResolverCall, resolver_call

TOP, WRIST = "observation.images.top", "observation.images.wrist"


PERSISTENT = [
    row("plan", "plan 0", 0.0), row("memory", "memory 0", 0.0), row("subtask", "subtask 0", 0.0),
    row("memory", "memory 1", 1.0), row("subtask", "subtask 1", 1.0),
]
EVENTS_AT_1 = [row("vqa", "how many cups?", role="user", camera=TOP), row("vqa", '{"count": 2}', camera=TOP)]
EVENTS_AT_2 = [row("interjection", "skip wiping", role="user"), speech_row("Skipping wiping.")]
EVENTS_AT_3_TWO_CAMERAS = [
    row("vqa", "how many cups?", role="user", camera=TOP), row("vqa", '{"count": 3}', camera=TOP),
    row("vqa", "how many cups?", role="user", camera=WRIST), row("vqa", '{"count": 1}', camera=WRIST),
]


@pytest.fixture
def timeline() -> EpisodeTimeline:
    return EpisodeTimeline(PERSISTENT, {1.0: EVENTS_AT_1, 2.0: EVENTS_AT_2, 3.0: EVENTS_AT_3_TWO_CAMERAS})


def content(found: dict[str, Any] | None) -> str | None:
    return None if found is None else found["content"]


def test_active_at_is_the_latest_row_at_or_before_t(timeline: EpisodeTimeline) -> None:
    assert content(timeline.active_at(0.5, style="subtask")) == "subtask 0"
    assert content(timeline.active_at(1.0, style="subtask")) == "subtask 1"
    assert content(timeline.active_at(0.9999, style="subtask")) == "subtask 0"  # exact, no tolerance
    assert timeline.active_at(-0.1, style="subtask") is None
    assert content(timeline.active_at(9.0, style="plan")) == "plan 0"
    assert timeline.active_at(9.0, style="subtask", role="user") is None


def test_emitted_at_reads_the_frame_events(timeline: EpisodeTimeline) -> None:
    assert timeline.emitted_at(0.5, style="vqa", role="assistant") is None
    assert content(timeline.emitted_at(1.0, style="vqa", role="assistant")) == '{"count": 2}'
    assert content(timeline.emitted_at(1.0, events=[], style="vqa", role="assistant")) is None
    assert content(timeline.emitted_at(2.0, style="interjection")) == "skip wiping"
    speech = timeline.emitted_at(2.0, role="assistant", tool_name="say")
    assert speech is not None and speech["tool_calls"][0]["function"]["arguments"] == {"text": "Skipping wiping."}
    assert timeline.emitted_at(2.0, role="assistant", tool_name="wave") is None


def test_emitted_at_filters_vqa_by_camera(timeline: EpisodeTimeline) -> None:
    assert content(timeline.emitted_at(3.0, style="vqa", role="assistant", camera=TOP)) == '{"count": 3}'
    assert content(timeline.emitted_at(3.0, style="vqa", role="assistant", camera=WRIST)) == '{"count": 1}'


def test_ambiguous_vqa_on_a_multi_camera_frame_names_the_cameras(timeline: EpisodeTimeline) -> None:
    with pytest.raises(RecipeError) as info:
        timeline.emitted_at(3.0, style="vqa", role="assistant")
    assert str(info.value) == (
        f"emitted_at(style=vqa, role=assistant) matches 2 rows at t=3s (cameras {TOP}, {WRIST}); "
        "add camera=<key> to the binding"
    )


def test_active_at_ties_are_ambiguous_even_with_selectors() -> None:
    rows = [row("subtask", "a", 1.0), row("subtask", "b", 1.0), row("subtask", "c", 0.0)]
    with pytest.raises(RecipeError, match="matches 2 rows at t=1.5s; add a selector"):
        EpisodeTimeline(rows).active_at(1.5, style="subtask", role="assistant")
    assert content(EpisodeTimeline(rows).active_at(0.5, style="subtask")) == "c"


def test_persistent_resolvers_reject_event_styles() -> None:
    timeline = EpisodeTimeline(PERSISTENT)
    with pytest.raises(RecipeError, match="event-only"):
        timeline.active_at(0.0, style="vqa")
    with pytest.raises(RecipeError, match="event-only"):
        timeline.nth_prev(0.0, style="interjection")
    with pytest.raises(RecipeError, match="offset must be non-zero"):
        timeline.nth_next(0.0, style="subtask", offset=0)
    with pytest.raises(RecipeError, match="unknown language style"):
        timeline.emitted_at(0.0, style="surprise")


def test_nth_prev_and_next_worked_examples() -> None:
    timeline = EpisodeTimeline([row("subtask", "s0", 0.0), row("subtask", "s1", 1.0)])
    assert content(timeline.nth_prev(1.0, style="subtask")) == "s0"
    assert timeline.nth_prev(0.0, style="subtask") is None
    assert content(timeline.nth_next(0.0, style="subtask")) == "s1"
    assert content(timeline.nth_next(-1.0, style="subtask")) == "s0"  # before the first row, it is "next 1"
    assert content(timeline.nth_next(-1.0, style="subtask", offset=2)) == "s1"
    assert timeline.nth_next(1.0, style="subtask") is None
    assert content(timeline.nth_prev(0.0, style="subtask", offset=-1)) == "s1"  # a negative offset flips


def test_nth_orders_equal_timestamps_by_style_then_role_without_ambiguity() -> None:
    rows = [row("subtask", "user row", 1.0, role="user"), row("subtask", "assistant row", 1.0),
            row("subtask", "first", 0.0)]
    timeline = EpisodeTimeline(rows)
    # sorted: first, assistant row, user row; the anchor at t=1 is the last of them
    assert content(timeline.nth_prev(1.0, style="subtask")) == "assistant row"
    assert content(timeline.nth_prev(1.0, style="subtask", offset=2)) == "first"
    assert content(timeline.nth_next(0.5, style="subtask")) == "assistant row"


def test_emitted_at_persistent_reference_tolerance() -> None:
    timeline = EpisodeTimeline([row("memory", "m", 1.0)])
    tol = EMITTED_AT_TOLERANCE_S
    assert content(timeline.emitted_at(1.0 + tol / 2, style="memory", frame_exact=False)) == "m"
    assert timeline.emitted_at(1.0 + 2 * tol, style="memory", frame_exact=False) is None
    # without fps the frame rule has no frame to match, so the tolerance applies
    assert content(timeline.emitted_at(1.0 + tol / 2, style="memory")) == "m"


def test_emitted_at_persistent_frame_exact_with_fps() -> None:
    fps = 30
    frames = [np.float32(i / fps).item() for i in range(60)]
    rows = [row("memory", "m1", frames[30]), row("memory", "m2", frames[32])]  # 2 frames = 0.067 s apart
    timeline = EpisodeTimeline(rows, fps=fps)
    hits = {i: content(timeline.emitted_at(t, style="memory")) for i, t in enumerate(frames)}
    assert {i: c for i, c in hits.items() if c} == {30: "m1", 32: "m2"}
    with pytest.raises(RecipeError, match="matches 2 rows"):  # the reference window cannot tell them apart
        timeline.emitted_at(frames[31], style="memory", frame_exact=False)


def test_tool_calls_as_json_text_match_only_when_decoded() -> None:
    as_json_text = row(None, None, tool_calls=['{"type": "function", "function": {"name": "say"}}', "not json"])
    timeline = EpisodeTimeline([])
    found = timeline.emitted_at(0.0, events=[as_json_text], tool_name="say")
    assert found is not None and found["tool_calls"] == [{"type": "function", "function": {"name": "say"}}, "not json"]
    assert timeline.emitted_at(0.0, events=[as_json_text], tool_name="say", decode_calls=False) is None  # reference
    assert timeline.emitted_at(0.0, events=[speech_row("hi")], tool_name="say", decode_calls=False) is not None


def test_rows_are_normalized_and_checked() -> None:
    arrow_row = pa.array([row("subtask", "from arrow", 0.5)])[0]  # a pyarrow StructScalar
    timeline = EpisodeTimeline([None, arrow_row, row("subtask", "np", np.float32(1.5))])
    assert content(timeline.active_at(1.0, style="subtask")) == "from arrow"
    assert content(timeline.active_at(2.0, style="subtask")) == "np"
    assert timeline.emitted_at(0.0, events=[None, pa.array([EVENTS_AT_2[0]])[0]], style="interjection") is not None
    with pytest.raises(LanguageSchemaError, match="language rows must be dictionaries"):
        EpisodeTimeline(["not a dict"])
    with pytest.raises(LanguageSchemaError, match="numeric timestamp"):
        EpisodeTimeline([row("subtask", "x")])


def test_task_rephrasings_and_events_lookup() -> None:
    rows = [row("task_aug", "a", 0.0, role="user"), row("task_aug", "ignored", 0.0),
            row("task_aug", "b", 5.0, role="user")]
    timeline = EpisodeTimeline(rows, {np.float32(1 / 3).item(): EVENTS_AT_2})
    assert [r["content"] for r in timeline.task_rephrasings] == ["a", "b"]
    assert timeline.events_at(np.float32(1 / 3)) == EVENTS_AT_2
    assert timeline.events_at(1 / 3) == ()  # events sit on the frame's stored timestamp exactly
    assert len(timeline.persistent_rows) == 3


# --- property: the index gives the same answers as a plain scan -----------------------------------

STYLES = ("subtask", "plan", "memory")
TIMES = (0.0, 0.5, 1.0, 1.02, 1.5, 2.0, 3.25)


def _matches(r: dict[str, Any], call: ResolverCall) -> bool:
    return all(v is None or r.get(k) == v for k, v in (("style", call.style), ("role", call.role)))


def scan(call: ResolverCall, rows: list[dict[str, Any]], t: float, fps: float | None) -> Any:
    """The reference semantics written as plain scans."""
    match = [r for r in rows if _matches(r, call)]
    if call.resolver == "active_at":
        before = [r for r in match if r["timestamp"] <= t]
        if not before:
            return None
        latest = [r for r in before if r["timestamp"] == max(x["timestamp"] for x in before)]
        return "ambiguous" if len(latest) > 1 else latest[0]
    if call.resolver == "emitted_at":
        if fps:
            hits = [r for r in match if t - 0.5 / fps <= r["timestamp"] < t + 0.5 / fps]
        else:
            hits = [r for r in match if abs(r["timestamp"] - t) <= EMITTED_AT_TOLERANCE_S]
        return "ambiguous" if len(hits) > 1 else (hits[0] if hits else None)
    ordered = sorted(match, key=lambda r: (r["timestamp"], r["style"] or "", r["role"] or ""))
    anchor = max((i for i, r in enumerate(ordered) if r["timestamp"] <= t), default=-1)
    target = anchor + (call.offset if call.resolver == "nth_next" else -call.offset)
    return ordered[target] if 0 <= target < len(ordered) else None


row_strategy = st.builds(
    lambda style, role, ts, n: row(style, f"{style}-{n}", ts, role=role),
    st.sampled_from(STYLES), st.sampled_from(("assistant", "user")), st.sampled_from(TIMES), st.integers(0, 99),
)
call_strategy = st.builds(
    lambda resolver, style, role, offset: resolver_call(resolver, style=style, role=role, offset=offset),
    st.sampled_from(("active_at", "emitted_at", "nth_prev", "nth_next")), st.sampled_from(STYLES),
    st.sampled_from((None, "assistant", "user")), st.sampled_from((1, 2, 3, -1, -2)),
)


@settings(max_examples=300, deadline=None)
@given(
    rows=st.lists(row_strategy, max_size=25),
    calls=st.lists(call_strategy, min_size=1, max_size=4),
    t=st.one_of(st.sampled_from(TIMES), st.floats(-1.0, 4.0, allow_nan=False)),
    fps=st.sampled_from((None, 10.0, 30.0)),
)
def test_indexed_resolvers_equal_a_plain_scan(
    rows: list[dict[str, Any]], calls: list[ResolverCall], t: float, fps: float | None
) -> None:
    timeline = EpisodeTimeline(rows, fps=fps)
    for call in calls:
        expected = scan(call, rows, t, fps)
        if expected == "ambiguous":
            with pytest.raises(RecipeError, match="matches"):
                timeline.resolve(call, t)
        else:
            assert timeline.resolve(call, t) is expected
