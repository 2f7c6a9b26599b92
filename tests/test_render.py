"""Rendering frames through recipes: reference behaviour, reference vectors, and our documented defaults."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from language_rows import row
from shared_data import shared_dataset
from steerable.errors import ConfigError, LanguageRowTypeError, LanguageSchemaError, RecipeError
from steerable.language import speech_row
from steerable.recipes import (
    EpisodeTimeline,
    Recipe,
    RenderOptions,
    WeightedChoice,
    builtin_recipe_names,
    choose_component,
    hash64,
    load_recipe,
    parse_recipe,
    render_sample,
    render_sample_reference,
    rephrasing_index,
)

TOP, WRIST, FRONT = "observation.images.top", "observation.images.wrist", "observation.images.front"
LEROBOT = RenderOptions(compat="lerobot")


def vqa_pair(camera: str, question: str, answer: str) -> list[dict[str, Any]]:
    return [row("vqa", question, role="user", camera=camera), row("vqa", answer, camera=camera)]


PERSISTENT = [
    row("plan", "plan 0", 0.0), row("memory", "memory 0", 0.0), row("subtask", "subtask 0", 0.0),
    row("memory", "memory 1", 1.0), row("subtask", "subtask 1", 1.0),
]
EVENTS_AT_1 = vqa_pair(TOP, "how many cups?", '{"count": 2}')
EVENTS_AT_2 = [row("interjection", "skip wiping", role="user"), speech_row("Skipping wiping.")]
EVENTS_AT_3_TWO_CAMERAS = (vqa_pair(TOP, "cups from above?", '{"count": 3}')
                           + vqa_pair(WRIST, "cups here?", '{"count": 1}'))
TASK_AUG = [row("task_aug", f"phrasing {i}", 0.0, role="user") for i in range(4)]


def turn(role: str, content: Any, stream: str = "high_level", **extra: Any) -> dict[str, Any]:
    return {"role": role, "content": content, "stream": stream, **extra}


def vqa_component(camera: str, weight: float = 1.0) -> dict[str, Any]:
    return {
        "weight": weight,
        "route": "vqa",
        "bindings": {"q": f"emitted_at(t, style=vqa, role=user, camera={camera})",
                     "a": f"emitted_at(t, style=vqa, role=assistant, camera={camera})"},
        "messages": [
            turn("user", [{"type": "image", "feature": camera}, {"type": "text", "text": "${q}"}], if_present="q"),
            turn("assistant", "${a}", target=True, if_present="a"),
        ],
    }


def render(recipe: Recipe, t: float, events: list[dict[str, Any]] | None = None, *, sample_idx: int = 0,
           persistent: list[dict[str, Any]] = PERSISTENT, **kwargs: Any) -> dict[str, Any] | None:
    out = render_sample_reference(recipe, persistent=persistent, events=events or [], t=t, sample_idx=sample_idx,
                                  **kwargs)
    return None if out is None else out.to_dict()


# --- the reference's rendering rules --------------------------------------------------------------


def test_substitution_if_present_multimodal_blocks_and_tool_calls() -> None:
    recipe = Recipe.from_dict({
        "bindings": {"plan": "active_at(t, style=plan)"},
        "messages": [
            turn("user", [{"type": "image", "feature": TOP}, {"type": "text", "text": "${task}: ${interjection}"}],
                 if_present="interjection"),
            turn("assistant", "${plan}", target=True, tool_calls_from="speech"),
        ],
    })
    out = render(recipe, 2.0, EVENTS_AT_2, task="clean kitchen", options=LEROBOT)
    assert out is not None
    assert out["messages"][0]["content"] == [{"type": "image", "feature": TOP},
                                             {"type": "text", "text": "clean kitchen: skip wiping"}]
    assert out["messages"][1]["content"] == "plan 0"
    assert out["messages"][1]["tool_calls"][0]["function"] == {"name": "say", "arguments": {"text": "Skipping wiping."}}
    assert out["message_streams"] == ["high_level", "high_level"]
    assert out["target_message_indices"] == [1]
    # the copy is deep: changing the sample leaves the dataset rows alone
    out["messages"][1]["tool_calls"][0]["function"]["arguments"]["text"] = "changed"
    assert EVENTS_AT_2[1]["tool_calls"][0]["function"]["arguments"]["text"] == "Skipping wiping."


def test_skipped_turns_shift_target_indices_and_missing_speech_leaves_a_bare_message() -> None:
    recipe = Recipe.from_dict({"messages": [
        turn("user", "${interjection}", if_present="interjection"),
        turn("user", "${task}"),
        {"role": "assistant", "stream": "high_level", "target": True, "tool_calls_from": "speech"},
    ]})
    out = render(recipe, 0.5, task="T", options=LEROBOT)
    assert out == {"messages": [{"role": "user", "content": "T"}, {"role": "assistant"}],
                   "message_streams": ["high_level", "high_level"], "target_message_indices": [1]}
    # By default a target with no text and no tool calls is never emitted: nothing is left to supervise.
    assert render(recipe, 0.5, task="T") is None
    assert render(recipe, 2.0, EVENTS_AT_2, task="T")["target_message_indices"] == [2]  # type: ignore[index]


@pytest.mark.parametrize("content", ["${subtask}", "  ${plan}  ", [{"type": "text", "text": "${subtask}"}]])
def test_an_unguarded_target_with_empty_text_is_skipped_by_default_and_kept_in_compat(content: Any) -> None:
    recipe = Recipe.from_dict({"messages": [turn("user", "${task}", "low_level"), turn("assistant", content,
                                                                                    "low_level", target=True)]})
    default = render(recipe, 0.5, persistent=[], task="T")
    assert default == {"messages": [{"role": "user", "content": "T"}], "message_streams": ["low_level"],
                       "target_message_indices": []}
    reference = render(recipe, 0.5, persistent=[], task="T", options=LEROBOT)
    assert reference is not None and reference["target_message_indices"] == [1]
    assert render(recipe, 0.5, task="T")["target_message_indices"] == [1]  # type: ignore[index]  # text: kept


def test_exact_event_miss_returns_none_when_the_target_is_skipped() -> None:
    recipe = Recipe.from_dict({"messages": [
        turn("user", "${vqa_query}", if_present="vqa_query"), turn("assistant", "${vqa}", target=True, if_present="vqa")
    ]})
    assert render(recipe, 0.5) is None
    assert render(recipe, 1.0, EVENTS_AT_1) is not None


def test_flow_only_low_level_recipe_renders_without_target() -> None:
    recipe = Recipe.from_dict({"messages": [turn("user", "${subtask}", "low_level")]})
    assert render(recipe, 0.5) == {"messages": [{"role": "user", "content": "subtask 0"}],
                                   "message_streams": ["low_level"], "target_message_indices": []}


def test_low_level_branch_renders_the_active_subtask() -> None:
    recipe = Recipe.from_dict({"blend": {"only": {"weight": 1, "messages": [
        turn("user", "${task}\nPlan: ${plan}\nMemory: ${memory}"),
        turn("assistant", "${subtask}", "low_level", target=True),
    ]}}})
    out = render(recipe, 0.5, task="T")
    assert out is not None
    assert out["messages"] == [{"role": "user", "content": "T\nPlan: plan 0\nMemory: memory 0"},
                               {"role": "assistant", "content": "subtask 0"}]
    assert out["message_streams"] == ["high_level", "low_level"] and out["target_message_indices"] == [1]


def test_placeholders_that_are_not_bindings_stay_literal() -> None:
    recipe = Recipe.from_dict({"messages": [turn("user", "$task ${1x} {task} ${task}", "low_level")]})
    out = render(recipe, 0.5, task="T")
    assert out is not None and out["messages"][0]["content"] == "$task ${1x} {task} T"


def test_declared_bindings_override_defaults_and_values_render_as_text() -> None:
    recipe = Recipe.from_dict({
        "bindings": {"subtask": "nth_next(t, style=subtask)"},
        "messages": [turn("user", "${task}|${memory}|${plan}", "low_level"),
                     turn("assistant", "${subtask}", target=True)],
    })
    out = render(recipe, 0.5, task=None)
    assert out is not None
    assert out["messages"] == [{"role": "user", "content": "|memory 0|plan 0"},  # no task renders as ""
                               {"role": "assistant", "content": "subtask 1"}]   # the declared resolver


def test_empty_rephrasing_falls_back_to_the_dataset_task() -> None:
    recipe = Recipe.from_dict({"messages": [turn("user", "${task}", "low_level")]})
    out = render(recipe, 0.0, persistent=[row("task_aug", "", 0.0, role="user")], task="T")
    assert out is not None and out["messages"][0]["content"] == "T"


def test_unreferenced_default_bindings_are_not_resolved_on_multi_camera_frames() -> None:
    recipe = Recipe.from_dict({"messages": [
        turn("user", "${task}", "low_level"),
        turn("assistant", "${subtask}", "low_level", target=True, if_present="subtask"),
    ]})
    for options in (RenderOptions(), LEROBOT):
        out = render(recipe, 3.0, EVENTS_AT_3_TWO_CAMERAS, task="T", options=options)
        assert out is not None and out["messages"][1]["content"] == "subtask 1"


def test_ambiguous_binding_on_a_multi_camera_frame_names_file_line_and_binding() -> None:
    recipe = parse_recipe(
        "messages:\n"
        "  - {role: user, content: '${task}', stream: high_level}\n"
        "  - {role: assistant, content: '${vqa}', stream: high_level, target: true}\n",
        origin="vqa.yaml",
    )
    with pytest.raises(RecipeError) as info:
        render(recipe, 3.0, EVENTS_AT_3_TWO_CAMERAS)
    assert str(info.value).startswith(
        "vqa.yaml:3: messages[1] (default binding 'vqa'): emitted_at(style=vqa, role=assistant) matches 2 rows at t=3s"
    )
    declared = parse_recipe(
        "bindings:\n  answer: emitted_at(t, style=vqa, role=assistant)\n"
        "messages:\n  - {role: assistant, content: '${answer}', stream: high_level, target: true}\n",
        origin="vqa.yaml",
    )
    with pytest.raises(RecipeError, match=r"^vqa\.yaml:2: bindings\.answer: .*add camera=<key>"):
        render(declared, 3.0, EVENTS_AT_3_TWO_CAMERAS)


def test_declared_but_unused_bindings_resolve_only_in_lerobot_compat() -> None:
    recipe = Recipe.from_dict({
        "bindings": {"unused": "emitted_at(t, style=vqa, role=assistant)"},
        "messages": [turn("user", "${task}", "low_level")],
    })
    assert render(recipe, 3.0, EVENTS_AT_3_TWO_CAMERAS, task="T") is not None
    with pytest.raises(RecipeError, match="matches 2 rows"):
        render(recipe, 3.0, EVENTS_AT_3_TWO_CAMERAS, task="T", options=LEROBOT)


def test_non_dict_language_rows_raise_a_type_error_as_in_the_reference() -> None:
    recipe = load_recipe("subtask_joint")
    for persistent, events in ((["not a dict"], []), (PERSISTENT, [7])):
        with pytest.raises(TypeError, match="must be dictionaries") as caught:
            render(recipe, 0.0, events, persistent=persistent)  # type: ignore[arg-type]
        assert isinstance(caught.value, LanguageRowTypeError) and isinstance(caught.value, LanguageSchemaError)


def test_subtask_joint_example() -> None:
    recipe = load_recipe("subtask_joint")
    assert render(recipe, 0.5, task="T") == {
        "messages": [{"role": "user", "content": "T"}, {"role": "assistant", "content": "subtask 0"}],
        "message_streams": ["low_level", "low_level"], "target_message_indices": [1]}
    assert render(recipe, 0.5, task="T", persistent=[]) == {
        "messages": [{"role": "user", "content": "T"}], "message_streams": ["low_level"], "target_message_indices": []}


# --- deterministic choices and the reference vectors ----------------------------------------------


def test_blake2b_reference_vectors() -> None:
    assert [f"{hash64(str(i)):016x}" for i in (0, 1, 2, 7)] == [
        "842b7d9d43cddf75", "f6fc42039fba3776", "1bf41ef6fd6f6f6c", "e75017cace788f82"]
    assert hash64("0") / 2**64 == pytest.approx(0.5163, abs=1e-4)


def test_blend_choice_reference_vectors() -> None:
    recipe = load_recipe("subtask_mem_vqa_speech")
    picks = [choose_component(recipe, i) for i in [*range(8), 42, 123]]
    assert [p[0] for p in picks if p] == [
        "low_level_execution", "ask_vqa_wrist", "high_level_subtask", "low_level_execution", "low_level_execution",
        "low_level_execution", "high_level_subtask", "ask_vqa_top", "low_level_execution", "ask_vqa_top"]


def test_task_aug_choice_reference_vector() -> None:
    assert [rephrasing_index(i, 4) for i in range(10)] == [1, 3, 3, 0, 2, 3, 3, 3, 0, 1]
    recipe = Recipe.from_dict({"messages": [turn("user", "${task}", "low_level")]})
    rendered = [render(recipe, 0.0, sample_idx=i, persistent=TASK_AUG) for i in range(10)]
    assert [r["messages"][0]["content"] for r in rendered if r] == [
        f"phrasing {i}" for i in [1, 3, 3, 0, 2, 3, 3, 3, 0, 1]]


def test_vqa_route_between_two_annotated_cameras_reference_vector() -> None:
    recipe = Recipe.from_dict({"blend": {
        "subtask": {"weight": 1, "messages": [turn("user", "${subtask}", "low_level")]},
        "ask_front": vqa_component(FRONT), "ask_wrist": vqa_component(WRIST)}})
    events = vqa_pair(FRONT, "q front", "a front") + vqa_pair(WRIST, "q wrist", "a wrist")
    for options in (RenderOptions(), LEROBOT):
        answers = [render(recipe, 1.0, events, sample_idx=i, options=options) for i in range(5)]
        assert [a["messages"][-1]["content"] for a in answers if a] == ["a front", "a wrist", "a front", "a front",
                                                                        "a front"]


def test_same_sample_index_renders_the_same_sample() -> None:
    recipe = Recipe.from_dict({"blend": {
        "a": {"weight": 1, "messages": [turn("user", "${task}"), turn("assistant", "${subtask}", target=True)]},
        "b": {"weight": 1, "messages": [turn("user", "${subtask}", "low_level")]}}})
    assert render(recipe, 0.5, sample_idx=123, task="T") == render(recipe, 0.5, sample_idx=123, task="T")


@pytest.mark.parametrize(("camera", "count"), [(TOP, "3"), (WRIST, "1")])
def test_per_camera_vqa_component_renders_its_own_view(camera: str, count: str) -> None:
    recipe = Recipe.from_dict({"blend": {"ask": vqa_component(camera)}})
    out = render(recipe, 3.0, EVENTS_AT_3_TWO_CAMERAS)
    assert out is not None
    image, text = out["messages"][0]["content"]
    assert image == {"type": "image", "feature": camera}
    assert text["text"] == ("cups from above?" if camera == TOP else "cups here?")
    assert out["messages"][1]["content"] == f'{{"count": {count}}}'


def test_vqa_frame_is_consumed_over_the_weighted_blend() -> None:
    recipe = Recipe.from_dict({"blend": {
        "subtask": {"weight": 0.99, "messages": [turn("user", "${task}"), turn("assistant", "a subtask", target=True)]},
        "descriptive_top_camera_name": vqa_component(TOP, 0.01)}})
    for options in (RenderOptions(), LEROBOT):
        for i in range(20):
            out = render(recipe, 1.0, EVENTS_AT_1, sample_idx=i, options=options)
            assert out is not None and out["messages"][-1]["content"] == '{"count": 2}'
        out = render(recipe, 0.5, sample_idx=0, options=options)
        assert out is not None and out["messages"][-1]["content"] == "a subtask"


# --- our defaults and the switches that restore the reference -------------------------------------


def test_task_rotation_applies_even_when_the_dataset_task_is_known() -> None:
    recipe = Recipe.from_dict({"messages": [turn("user", "${task}", "low_level")]})

    def task_for(i: int, persistent: list[dict[str, Any]], **kw: Any) -> str:
        out = render(recipe, 0.0, sample_idx=i, persistent=persistent, **kw)
        assert out is not None
        return str(out["messages"][0]["content"])

    assert {task_for(i, TASK_AUG, task="canonical") for i in range(64)} == {f"phrasing {i}" for i in range(4)}
    assert task_for(42, TASK_AUG, task="canonical") == task_for(42, TASK_AUG, task="canonical")
    # the reference lets the dataset task win; `task_source="dataset"` alone restores that
    assert {task_for(i, TASK_AUG, task="canonical", options=LEROBOT) for i in range(64)} == {"canonical"}
    assert task_for(0, TASK_AUG, task="canonical", options=RenderOptions(task_source="dataset")) == "canonical"
    # without a task, both rotate; without rephrasings, both read the task (or the dataset_ctx task)
    assert task_for(0, TASK_AUG, options=LEROBOT) == "phrasing 1"
    assert task_for(0, PERSISTENT, task="canonical") == "canonical"
    assert task_for(0, PERSISTENT, dataset_ctx={"task": "from ctx"}) == "from ctx"
    assert task_for(5, TASK_AUG, options=LEROBOT, dataset_ctx={"task": "from ctx"}) == "phrasing 3"


def test_routed_vqa_leaves_the_draw_on_frames_without_vqa() -> None:
    recipe = load_recipe("subtask_mem_vqa_speech")
    routed_draws = [i for i in range(60) if (c := choose_component(recipe, i)) and c[1].route == "vqa"]
    assert routed_draws[:2] == [1, 7]  # the reference vector: ask_vqa_wrist, ask_vqa_top
    for i in routed_draws:  # the reference renders nothing for them on a frame without VQA
        assert render(recipe, 0.5, sample_idx=i, task="T", options=LEROBOT) is None
        assert render(recipe, 0.5, sample_idx=i, task="T", options=RenderOptions(vqa_routing="reference")) is None
    # ours: only user_interjection_response (no interjection on this frame) still renders nothing
    timeline = EpisodeTimeline(PERSISTENT)
    n = 4000
    none_ours = sum(render_sample(recipe, timeline, t=0.5, sample_idx=i, task="T") is None for i in range(n))
    none_ref = sum(render_sample(recipe, timeline, t=0.5, sample_idx=i, task="T", options=LEROBOT) is None
                   for i in range(n))
    assert none_ours / n == pytest.approx(0.10 / 0.85, abs=0.02)
    assert none_ref / n == pytest.approx(0.25, abs=0.02)


def test_renormalised_blend_frequencies_on_frames_without_vqa() -> None:
    recipe = load_recipe("subtask_mem_vqa_speech")
    timeline = EpisodeTimeline(PERSISTENT)
    counts = Counter(
        s.component for i in range(6000)
        if (s := render_sample(recipe, timeline, t=0.5, sample_idx=i, task="T")) is not None
    )
    assert "ask_vqa_top" not in counts and "ask_vqa_wrist" not in counts
    # user_interjection_response renders nothing without an interjection; the rest keep their ratios
    drawn = counts["high_level_subtask"] + counts["low_level_execution"] + counts["memory_update"]
    assert counts["high_level_subtask"] / drawn == pytest.approx(0.25 / 0.75, abs=0.03)
    assert counts["low_level_execution"] / drawn == pytest.approx(0.40 / 0.75, abs=0.03)


def test_emitted_at_frame_exact_vs_reference_window() -> None:
    fps = 10
    recipe = Recipe.from_dict({
        "bindings": {"new_memory": "emitted_at(t, style=memory)"},
        "messages": [turn("user", "${task}"), turn("assistant", "${new_memory}", target=True, if_present="new_memory")],
    })
    timeline = EpisodeTimeline(PERSISTENT, fps=fps)
    frames = [i / fps for i in range(20)]
    ours = [t for t in frames if render_sample(recipe, timeline, t=t, sample_idx=0, task="T")]
    assert ours == [0.0, 1.0]
    theirs = [t for t in frames if render_sample(recipe, timeline, t=t, sample_idx=0, task="T", options=LEROBOT)]
    assert theirs == [0.0, 0.1, 0.9, 1.0]  # |1.1 - 1.0| is a hair over 0.1 in floats


def test_render_options_validation() -> None:
    with pytest.raises(ConfigError, match="task_source"):
        RenderOptions(task_source="random")  # type: ignore[arg-type]
    lerobot = RenderOptions(compat="lerobot", task_source="rephrasing")
    assert (lerobot.task_source, lerobot.vqa_routing, lerobot.emitted_at_match, lerobot.empty_target) == (
        "dataset", "reference", "tolerance", "keep")


def test_timeline_supplies_frame_events_when_none_are_passed() -> None:
    recipe = Recipe.from_dict({"messages": [turn("assistant", "${interjection}", target=True,
                                                 if_present="interjection")]})
    timeline = EpisodeTimeline(PERSISTENT, {2.0: EVENTS_AT_2})
    out = render_sample(recipe, timeline, t=2.0, sample_idx=0)
    assert out is not None and out.messages == [{"role": "assistant", "content": "skip wiping"}]
    assert render_sample(recipe, timeline, t=2.0, sample_idx=0, frame_events=[]) is None


# --- properties and whole-recipe checks -----------------------------------------------------------


@settings(max_examples=25, deadline=None)
@given(weights=st.lists(st.floats(0.05, 10.0), min_size=1, max_size=5), salt=st.sampled_from(("", "vqa:")))
def test_blend_frequencies_converge_to_weights(weights: list[float], salt: str) -> None:
    choice = WeightedChoice(weights, salt=salt)
    n = 10000
    counts = Counter(choice.pick(i) for i in range(n))
    for i, w in enumerate(weights):
        assert counts[i] / n == pytest.approx(w / sum(weights), abs=0.025)


@settings(max_examples=200, deadline=None)
@given(weights=st.lists(st.floats(0.001, 100.0), min_size=1, max_size=8), sample_idx=st.integers(0, 10**12))
def test_weighted_choice_equals_the_reference_walk(weights: list[float], sample_idx: int) -> None:
    draw = hash64(str(sample_idx)) / 2**64 * sum(weights)
    cumulative, expected = 0.0, len(weights) - 1
    for i, w in enumerate(weights):
        cumulative += w
        if draw < cumulative:
            expected = i
            break
    assert WeightedChoice(weights).pick(sample_idx) == expected


def _episode() -> tuple[list[dict[str, Any]], dict[float, list[dict[str, Any]]]]:
    persistent = [*TASK_AUG[:2]]
    events: dict[float, list[dict[str, Any]]] = {}
    for k in range(6):
        t = float(k)
        persistent += [row("subtask", f"step {k}", t), row("plan", f"plan {k}", t), row("memory", f"mem {k}", t),
                       row("motion", f"move {k}", t + 0.5)]
        events[t + 0.5] = vqa_pair(TOP, f"q{k}", f"a{k}") + vqa_pair(WRIST, f"qw{k}", f"aw{k}")
        events[t + 0.2] = [row("interjection", f"stop {k}", role="user"), speech_row(f"ok {k}")]
    return persistent, events


@pytest.mark.parametrize("name", builtin_recipe_names())
@pytest.mark.parametrize("options", [RenderOptions(), LEROBOT], ids=["steerable", "lerobot"])
def test_every_builtin_renders_well_formed_samples(name: str, options: RenderOptions) -> None:
    recipe = load_recipe(name)
    persistent, events = _episode()
    timeline = EpisodeTimeline(persistent, events, fps=10)
    rendered = 0
    for i in range(60):
        t = i / 10
        sample = render_sample(recipe, timeline, t=t, sample_idx=1000 + i, task="tidy up", options=options)
        if sample is None:
            continue
        rendered += 1
        assert len(sample.messages) == len(sample.message_streams)
        assert all(0 <= k < len(sample.messages) for k in sample.target_message_indices)
        assert sample.target_message_indices or "low_level" in sample.message_streams
        assert all(set(m) <= {"role", "content", "tool_calls"} for m in sample.messages)
        json.dumps(sample.to_dict())
        if recipe.camera_keys and any(r["style"] == "vqa" for r in events.get(t, [])):  # VQA frames train VQA
            assert sample.component.startswith("ask_vqa")
    # This episode has an interjection in every step: components that leave out the frames after a
    # correction (`if_absent`, the hierarchical recipe) render on fewer of them.
    guarded = any(t.if_absent for _, c in recipe.components() for t in c.messages or ())
    assert rendered > (20 if guarded else 30)


def test_render_on_real_frame_timestamps_of_a_lerobot_dataset() -> None:
    root = shared_dataset("so101_record_test")
    fps = json.loads((root / "meta" / "info.json").read_text())["fps"]
    table = pq.read_table(root / "data" / "chunk-000" / "file-000.parquet",
                          columns=["timestamp", "index", "episode_index"])
    frames = [r for r in table.to_pylist() if r["episode_index"] == 0]
    times = [f["timestamp"] for f in frames]  # float32 values, as stored
    persistent = [row("subtask", f"sub {k}", times[k * 100]) for k in range(4)]
    persistent += [row("memory", f"mem {k}", times[k * 100]) for k in range(1, 4)]
    events = {times[150]: vqa_pair(FRONT, "where is the cube?", '{"label": "cube", "point": [10, 20]}')}
    recipe = load_recipe("subtask_mem_vqa_speech", camera_map={"top": FRONT, "wrist": "observation.images.top"})
    new_memory = Recipe.from_dict({"bindings": {"m": "emitted_at(t, style=memory)"},
                                   "messages": [turn("assistant", "${m}", target=True, if_present="m")]})
    timeline = EpisodeTimeline(persistent, events, fps=fps)
    samples = {f["index"]: render_sample(recipe, timeline, t=f["timestamp"], sample_idx=f["index"], task="pick")
               for f in frames}
    assert samples[frames[150]["index"]].component == "ask_vqa_top"  # type: ignore[union-attr]
    assert samples[frames[150]["index"]].messages[0]["content"][0]["feature"] == FRONT  # type: ignore[union-attr]
    assert sum(s is None for s in samples.values()) < len(frames) * 0.2
    hits = [i for i, f in enumerate(frames) if render_sample(new_memory, timeline, t=f["timestamp"], sample_idx=0)]
    assert hits == [100, 200, 300]  # exactly the frame each memory row was written on


def test_a_say_call_given_as_json_text_is_read_by_default_and_skipped_in_compat() -> None:
    component = Recipe.from_dict({"messages": [turn("user", "${interjection}", if_present="interjection"), {
        "role": "assistant", "stream": "high_level", "target": True, "tool_calls_from": "speech",
        "if_present": "speech"}]})
    text_call = json.dumps(speech_row("Sure.")["tool_calls"][0])
    events = [row("interjection", "gently", role="user"), {**speech_row("Sure."), "tool_calls": [text_call]}]
    out = render(component, 2.0, events)
    assert out is not None and out["messages"][-1]["tool_calls"][0]["function"]["arguments"] == {"text": "Sure."}
    assert render(component, 2.0, events, options=LEROBOT) is None  # the reference's matcher skips text
    assert events[1]["tool_calls"] == [text_call]  # the caller's rows are not modified
