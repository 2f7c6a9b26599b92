"""`last_emitted` and `if_absent`: components that leave out the frames after an operator's correction.

The hierarchical recipe trains prompts that show neither the interjection nor the revised plan
(plan, progress, the updates); after a correction their answers name a target the prompt never
gives, so those frames are left out there and kept where the prompt carries the correction.
"""

from __future__ import annotations

import textwrap
from typing import Any

import pytest

from language_rows import row
from steerable.errors import RecipeError
from steerable.language import speech_row
from steerable.recipes import EpisodeTimeline, Recipe, load_recipe, parse_recipe, render_sample
from steerable.recipes.lerobot_check import check_for_lerobot
from steerable.recipes.lerobot_export import export_for_lerobot

TASK = "stack the red cube on the blue cube"
# pick (0-2 s), place on blue (2-3 s), redirected at 3 s: place on green (3-5 s).
PERSISTENT = [
    row("subtask", "pick up the red cube", 0.0),
    row("plan", "1. pick up the red cube\n2. place the red cube on the blue cube", 0.0),
    row("memory", "Holding the red cube.", 2.0), row("subtask", "place the red cube on the blue cube", 2.0),
    row("plan", "1. place the red cube on the blue cube", 2.0),
    row("subtask", "place the red cube on the green cube", 3.0),
    row("plan", "1. place the red cube on the green cube", 3.0),
]
EVENTS = {3.0: [row("interjection", "put it on the green cube instead", role="user"), speech_row("Green it is.")]}


def timeline() -> EpisodeTimeline:
    return EpisodeTimeline(PERSISTENT, EVENTS, fps=10)


def component(recipe: Recipe, name: str) -> Recipe:
    return dict(recipe.components())[name]


def rendered(recipe: Recipe, t: float) -> list[dict[str, Any]] | None:
    out = render_sample(recipe, timeline(), t=t, sample_idx=0, task=TASK)
    return None if out is None else out.messages


def test_last_emitted_is_the_latest_event_at_or_before_the_frame() -> None:
    tl = timeline()
    assert tl.last_emitted(2.9, style="interjection") is None
    instead = "put it on the green cube instead"
    assert tl.last_emitted(3.0, style="interjection")["content"] == instead  # type: ignore[index]
    assert tl.last_emitted(4.5, style="interjection")["content"] == instead  # type: ignore[index]
    said = tl.last_emitted(4.5, role="assistant", tool_name="say")
    assert said["tool_calls"][0]["function"]["name"] == "say"  # type: ignore[index]
    # A frame's own events win over earlier ones, and two matching rows on the latest frame are ambiguous.
    later = {**EVENTS, 4.0: [row("interjection", "no, the blue one", role="user")]}
    latest = EpisodeTimeline(PERSISTENT, later).last_emitted(4.5, style="interjection")
    assert latest["content"] == "no, the blue one"  # type: ignore[index]
    two = {3.0: [row("interjection", "a", role="user"), row("interjection", "b", role="user")]}
    with pytest.raises(RecipeError, match="matches 2 rows"):
        EpisodeTimeline(PERSISTENT, two).last_emitted(4.0, style="interjection")


def test_if_absent_leaves_the_turn_out_and_a_target_left_out_renders_nothing() -> None:
    recipe = Recipe.from_dict({
        "bindings": {"corrected": "last_emitted(t, style=interjection)"},
        "messages": [
            {"role": "user", "content": "${task}", "stream": "high_level"},
            {"role": "user", "content": "first try", "stream": "high_level", "if_absent": "corrected"},
            {"role": "assistant", "content": "${plan}", "stream": "high_level", "target": True},
        ],
    })
    assert [m["content"] for m in rendered(recipe, 1.0) or []] == [TASK, "first try", PERSISTENT[1]["content"]]
    assert [m["content"] for m in rendered(recipe, 4.0) or []] == [TASK, "1. place the red cube on the green cube"]
    guarded = Recipe.from_dict({
        "bindings": {"corrected": "last_emitted(t, style=interjection)"},
        "messages": [
            {"role": "user", "content": "${task}", "stream": "high_level"},
            {"role": "assistant", "content": "${plan}", "stream": "high_level", "target": True,
             "if_absent": "corrected"},
        ],
    })
    assert rendered(guarded, 2.5) is not None
    assert rendered(guarded, 3.0) is None and rendered(guarded, 4.9) is None


@pytest.mark.parametrize("name", ["plan", "progress", "plan_update", "memory_update"])
def test_hierarchical_components_without_the_correction_leave_out_the_frames_after_it(name: str) -> None:
    part = component(load_recipe("hierarchical"), name)
    before = rendered(part, 2.5)
    assert before is not None, name
    assert all("green" not in str(m.get("content")) for m in before)
    assert rendered(part, 3.0) is None and rendered(part, 4.5) is None


def test_hierarchical_components_that_show_the_correction_keep_those_frames() -> None:
    recipe = load_recipe("hierarchical")
    subtask = rendered(component(recipe, "high_level_subtask"), 4.5)
    assert subtask is not None and subtask[-1]["content"] == "place the red cube on the green cube"
    assert "green" in subtask[1]["content"]  # the revised plan is in the prompt
    reply = rendered(component(recipe, "interjection_response"), 3.0)
    assert reply is not None and reply[-1]["tool_calls"][0]["function"]["arguments"] == {"text": "Green it is."}
    assert rendered(component(recipe, "low_level_execution"), 4.5) == [
        {"role": "user", "content": "place the red cube on the green cube"}]


def parse_error(text: str) -> str:
    with pytest.raises(RecipeError) as info:
        parse_recipe(textwrap.dedent(text).lstrip("\n"), origin="x.yaml")
    return str(info.value)


def test_bad_conditions_are_refused_with_file_line_and_key() -> None:
    assert "x.yaml:7: messages[1].if_absent: unknown binding 'fixed'" in parse_error("""
        messages:
          - {role: user, content: "${task}", stream: high_level}
          - role: assistant
            content: "${plan}"
            stream: high_level
            target: true
            if_absent: fixed
    """)
    assert "if_absent: task` never renders the turn" in parse_error("""
        messages:
          - {role: assistant, content: "${plan}", stream: high_level, target: true, if_absent: task}
    """)
    message = parse_error("""
        bindings:
          corrected: last_emitted(t, style=plan)
        messages:
          - {role: assistant, content: "${plan}", stream: high_level, target: true, if_absent: corrected}
    """)
    assert "x.yaml:2: bindings.corrected: last_emitted reads event rows" in message and "use active_at" in message


def test_lerobot_form_drops_the_condition_and_its_binding() -> None:
    exported = export_for_lerobot(load_recipe("hierarchical"), name="hierarchical")
    body = "\n".join(line for line in exported.text.splitlines() if not line.startswith("#"))
    assert "if_absent" not in body and "last_emitted" not in body and "corrected" not in body
    assert sum("if_absent: corrected` dropped" in d for d in exported.differences) == 4
    # A turn that reads a last_emitted binding itself has no LeRobot form.
    reads = Recipe.from_dict({"bindings": {"said": "last_emitted(t, style=interjection)"}, "messages": [
        {"role": "assistant", "content": "${said}", "stream": "high_level", "target": True}]})
    with pytest.raises(RecipeError, match="binding 'said'.*no LeRobot form"):
        export_for_lerobot(reads, name="x")


def test_lerobot_rules_refuse_if_absent_and_flag_last_emitted() -> None:
    verdict = check_for_lerobot({"bindings": {"c": "last_emitted(t, style=interjection)"}, "messages": [
        {"role": "assistant", "content": "${plan}", "stream": "high_level", "target": True, "if_absent": "c"}]})
    assert any("'if_absent' (steerable's turn condition) is not a turn field" in r for r in verdict.refusals)
    assert any("bindings.c: last_emitted is steerable's resolver" in h for h in verdict.hazards)
