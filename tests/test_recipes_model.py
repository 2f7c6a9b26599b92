"""Recipe model and loading: every validation rule, with file, line and key in the message."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from steerable.errors import RecipeError
from steerable.recipes import (
    MessageTurn,
    Recipe,
    builtin_recipe_names,
    load_recipe,
    parse_recipe,
    render_sample_reference,
)

SIMPLE_TURNS = [
    {"role": "user", "content": "${task}", "stream": "high_level"},
    {"role": "assistant", "content": "${subtask}", "stream": "high_level", "target": True},
]


def parse(text: str, **kwargs: object) -> Recipe:
    return parse_recipe(textwrap.dedent(text).lstrip("\n"), origin="x.yaml", **kwargs)  # type: ignore[arg-type]


def error_of(text: str, **kwargs: object) -> str:
    with pytest.raises(RecipeError) as info:
        parse(text, **kwargs)
    message = str(info.value)
    assert "\n" not in message  # a user-facing error is one line
    return message


# --- built-ins ---------------------------------------------------------------------------------


def test_builtins_include_the_reference_four_plus_hirobot_and_motion() -> None:
    names = builtin_recipe_names()
    for name in ("subtask", "subtask_joint", "subtask_mem", "subtask_mem_vqa_speech", "hirobot", "motion"):
        assert name in names
    for name in names:
        recipe = load_recipe(name)
        assert recipe.description


def test_canonical_builtin_is_a_blend_whose_weights_sum_to_one() -> None:
    recipe = load_recipe("subtask_mem_vqa_speech")
    assert recipe.is_blend and recipe.blend is not None
    assert sum(c.weight or 0 for c in recipe.blend.values()) == pytest.approx(1.0)
    assert [n for n, c in recipe.components() if c.route == "vqa"] == ["ask_vqa_top", "ask_vqa_wrist"]


def test_motion_builtin_reads_motion_rows() -> None:
    recipe = load_recipe("motion")
    assert any(call.style == "motion" for _, c in recipe.components() for call in c.bindings.values())


def test_builtin_cameras_are_bound_through_camera_map() -> None:
    default = load_recipe("hirobot")
    assert default.camera_keys == {"observation.images.top", "observation.images.wrist"}
    mapped = load_recipe("hirobot", camera_map={"top": "image", "wrist": "observation.images.hand"})
    assert mapped.camera_keys == {"image", "observation.images.hand"}
    assert mapped.cameras == {"top": "image", "wrist": "observation.images.hand"}
    assert mapped.blend is not None
    vqa_top = mapped.blend["ask_vqa_top"]
    assert vqa_top.bindings["vqa"].camera == "image"
    assert vqa_top.messages is not None and vqa_top.messages[0].content[0] == {"type": "image", "feature": "image"}


def test_unknown_builtin_name_lists_the_builtins() -> None:
    with pytest.raises(RecipeError, match="no built-in recipe named 'subtsk'.*subtask_mem"):
        load_recipe("subtsk")


def test_missing_recipe_file() -> None:
    with pytest.raises(RecipeError, match="recipe file not found: .*nope.yaml"):
        load_recipe("/tmp/definitely/nope.yaml")


# --- round trips -------------------------------------------------------------------------------


def test_from_dict_with_nested_blend_components() -> None:
    recipe = Recipe.from_dict(
        {"blend": {"a": {"weight": 1, "messages": SIMPLE_TURNS}, "b": {"weight": 2.0, "messages": SIMPLE_TURNS}}}
    )
    assert recipe.blend is not None and list(recipe.blend) == ["a", "b"]
    assert recipe.blend["b"].weight == 2.0
    assert all(isinstance(t, MessageTurn) for t in recipe.blend["a"].messages or ())


def test_yaml_file_and_dict_give_the_same_recipe(tmp_path: Path) -> None:
    text = """
        bindings:
          custom: active_at(t, style=plan)
        messages:
          - {role: user, content: "${task} ${custom}", stream: high_level}
          - {role: assistant, content: "${subtask}", stream: high_level, target: true}
    """
    path = tmp_path / "r.yaml"
    path.write_text(textwrap.dedent(text))
    from_file = load_recipe(path)
    from_dict = Recipe.from_dict(
        {"bindings": {"custom": "active_at(t, style=plan)"},
         "messages": [{**SIMPLE_TURNS[0], "content": "${task} ${custom}"}, SIMPLE_TURNS[1]]}
    )
    assert from_file == from_dict == parse(text)
    assert from_file.messages is not None and from_file.messages[1].target is True
    assert from_file.referenced_binding_names() == {"task", "custom", "subtask"}


def test_yaml_merge_keys_share_turns() -> None:
    recipe = parse("""
        blend:
          a:
            weight: 1
            messages:
              - &ask {role: user, content: "${task}", stream: low_level}
          b:
            weight: 1
            messages:
              - {<<: *ask, stream: high_level}
              - {role: assistant, content: "${plan}", stream: high_level, target: true}
    """)
    assert recipe.blend is not None
    assert recipe.blend["b"].messages is not None
    assert recipe.blend["b"].messages[0] == MessageTurn(role="user", content="${task}", stream="high_level")


# --- located errors ----------------------------------------------------------------------------


def test_typo_in_turn_key_names_file_line_and_suggestion() -> None:
    message = error_of("""
        blend:
          memory_update:
            weight: 0.5
            messages:
              - {role: user, content: "${task}", stream: high_level}
              - role: assistant
                content: "${memory}"
                stream: high_level
                targt: true
    """)
    assert message == (
        "x.yaml:9: blend.memory_update.messages[1]: unknown key 'targt' (did you mean 'target'?); "
        "allowed keys: role, content, stream, target, if_present, tool_calls_from, if_absent"
    )


def test_unknown_top_level_and_component_keys() -> None:
    assert error_of("mesages: []\n").startswith("x.yaml:1: unknown key 'mesages' (did you mean 'messages'?)")
    message = error_of("""
        blend:
          a:
            wieght: 1
            messages: []
    """)
    assert message.startswith("x.yaml:3: blend.a: unknown key 'wieght' (did you mean 'weight'?)")


def test_unknown_binding_points_at_the_referencing_key() -> None:
    message = error_of("""
        messages:
          - {role: user, content: "${task}", stream: high_level}
          - role: assistant
            content: "${subtsk}"
            stream: high_level
            target: true
    """)
    assert message.startswith("x.yaml:4: messages[1].content: unknown binding 'subtsk' (did you mean 'subtask'?)")
    message = error_of("""
        messages:
          - {role: user, content: "${task}", stream: high_level, if_present: nothing}
          - {role: assistant, content: "hi", stream: high_level, target: true}
    """)
    assert "messages[0].if_present: unknown binding 'nothing'" in message


def test_unknown_binding_inside_a_content_block() -> None:
    message = error_of("""
        messages:
          - role: user
            stream: high_level
            content:
              - {type: text, text: "${question}"}
          - {role: assistant, content: "a", stream: high_level, target: true}
    """)
    assert "messages[0].content: unknown binding 'question'" in message


@pytest.mark.parametrize(
    ("turn", "expected"),
    [
        ('{role: user, content: "${task}"}', "missing a stream"),
        ('{role: user, content: "${task}", stream: mid_level}', "unsupported stream 'mid_level'"),
        ('{role: usr, content: "${task}", stream: high_level}', "unsupported role 'usr' (did you mean 'user'?)"),
        ("{role: user, stream: high_level}", "needs content (unless tool_calls_from is set)"),
        ("{role: user, content: 42, stream: high_level}", "content must be a string or a list of blocks"),
        ("{role: user, content: [{text: hi}], stream: high_level}", "must be a mapping with a string `type`"),
        ("{role: user, content: [{type: image}], stream: high_level}", "an image block needs a string `feature`"),
        ('{role: user, content: "x", stream: high_level, target: "yes please"}', "target must be true or false"),
        ('{content: "x", stream: high_level}', "missing `role`"),
        ('{role: assistant, stream: high_level, tool_calls_from: task}', "task is text and has no tool calls"),
    ],
)
def test_turn_validation(turn: str, expected: str) -> None:
    message = error_of(f"""
        messages:
          - {{role: assistant, content: "${{subtask}}", stream: low_level, target: true}}
          - {turn}
    """)
    assert message.startswith("x.yaml:3: messages[1]")
    assert expected in message


def test_message_recipe_needs_a_supervised_turn() -> None:
    message = error_of("""
        messages:
          - {role: user, content: "${task}", stream: high_level}
    """)
    assert message.startswith("x.yaml:1: messages: no supervised turn")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("description: x\n", "must set one of messages"),
        ("messages: []\nblend: {}\n", "either messages or blend, not both"),
        ("blend: {}\n", "blend needs at least one component"),
        ("blend: [a, b]\n", "blend must map component names"),
        ("- a\n- b\n", "a recipe must be a mapping at the top level"),
        ("messages: hello\n", "messages must be a list of turns"),
    ],
)
def test_recipe_shape_errors(text: str, expected: str) -> None:
    assert expected in error_of(text)


@pytest.mark.parametrize(
    ("component", "expected", "line"),
    [
        ("weight: 0.5", "must define messages", 2),
        (f"messages: {SIMPLE_TURNS}", "must define a weight", 2),
        (f"weight: 0\n    messages: {SIMPLE_TURNS}", "blend.a.weight: a blend component needs a positive weight, got 0",
         3),
        (f"weight: -1.5\n    messages: {SIMPLE_TURNS}", "positive weight, got -1.5", 3),
        (f"weight: heavy\n    messages: {SIMPLE_TURNS}", "weight must be a number, got 'heavy'", 3),
        (f"weight: true\n    messages: {SIMPLE_TURNS}", "weight must be a number, got True", 3),
        (f"weight: .nan\n    messages: {SIMPLE_TURNS}", "weight must be a number", 3),
        (f"weight: 1\n    route: camera\n    messages: {SIMPLE_TURNS}", "unsupported route 'camera'", 4),
        (f"weight: 1\n    blend: {{}}\n    messages: {SIMPLE_TURNS}", "cannot itself define a blend", 4),
        (f"weight: 1\n    cameras: {{}}\n    messages: {SIMPLE_TURNS}", "unknown key 'cameras'", 4),
    ],
)
def test_blend_component_errors(component: str, expected: str, line: int) -> None:
    message = error_of(f"blend:\n  a:\n    {component}\n")
    assert expected in message
    assert message.startswith(f"x.yaml:{line}: blend.a")


def test_top_level_weight_and_route_are_accepted_and_ignored_as_in_the_reference() -> None:
    turns = f"messages: {SIMPLE_TURNS}\n"
    plain = parse(turns)
    for extra in ("weight: 2\n", "route: vqa\n", "weight: 0.3\nroute: vqa\n"):
        recipe = parse(extra + turns)
        assert recipe.weight is None and recipe.route is None and recipe.messages == plain.messages
        subtask = {"role": "assistant", "content": "s0", "style": "subtask", "timestamp": 0.0}
        sample = render_sample_reference(recipe, persistent=[subtask], events=[], t=0.0, sample_idx=0, task="T")
        assert sample is not None  # a top-level route does not turn the recipe into a VQA-only one
    blend = parse(f"weight: 5\nblend:\n  a:\n    weight: 1\n    {turns}")
    assert blend.is_blend and blend.weight is None
    assert "route can only be set on a message recipe inside a blend" in error_of(
        f"route: vqa\nblend:\n  a:\n    weight: 1\n    {turns}"
    )
    assert "x.yaml:1: route: unsupported route 'camera'" in error_of(f"route: camera\n{turns}")
    assert "bindings on a blend are never used" in error_of(
        f"bindings: {{x: 'active_at(t, style=plan)'}}\nblend:\n  a:\n    weight: 1\n    {turns}"
    )


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ("active_at t style=subtask", "invalid resolver expression"),
        ("active_on(t, style=subtask)", "unknown resolver 'active_on' (did you mean 'active_at'?)"),
        ("active_at(t, stlye=subtask)", "unknown argument 'stlye' (did you mean 'style'?)"),
        ("active_at(t, subtask)", "argument 'subtask' must be written key=value"),
        ("active_at(t, style=subtask, style=plan)", "argument 'style' is given twice"),
        ("active_at(t, style=)", "argument 'style' has an empty value"),
        ("active_at(t, style=vqa)", "active_at cannot read event-only style 'vqa'"),
        ("nth_prev(t, style=interjection)", "nth_prev cannot read event-only style 'interjection'"),
        ("active_at(t, role=assistant)", "active_at needs a style="),
        ("active_at(t, style=surprise)", "unknown language style 'surprise'"),
        ("emitted_at(t, style=surprise)", "unknown language style 'surprise'"),
        ("nth_next(t, style=subtask, offset=0)", "offset must be non-zero"),
        ("nth_next(t, style=subtask, offset=two)", "offset must be an integer"),
        ("active_at(t, style=subtask, offset=1)", "unknown argument 'offset'"),
        ("active_at(t, style=subtask, role=asistant)", "unknown role 'asistant' (did you mean 'assistant'?)"),
        ("active_at(t, style=subtask, camera=observation.images.top)", "camera= never matches style 'subtask'"),
    ],
)
def test_binding_expression_errors(expr: str, expected: str) -> None:
    message = error_of(f"""
        bindings:
          x: "{expr}"
        messages:
          - {{role: assistant, content: "${{x}}", stream: high_level, target: true}}
    """)
    assert message.startswith("x.yaml:2: bindings.x: ")
    assert expected in message


def test_binding_names_and_values_are_checked() -> None:
    turns = f"messages: {SIMPLE_TURNS}\n"
    assert "`task` is built in" in error_of(f"bindings: {{task: 'active_at(t, style=plan)'}}\n{turns}")
    assert "a binding must be a resolver expression string" in error_of(f"bindings: {{x: 3}}\n{turns}")
    assert "must be an identifier" in error_of(f"bindings: {{'two words': 'active_at(t, style=plan)'}}\n{turns}")


def test_quoted_resolver_arguments_and_bare_t_are_accepted() -> None:
    recipe = parse("""
        bindings:
          q: emitted_at(style="vqa", t, role='user', camera=observation.images.top)
        messages:
          - {role: assistant, content: "${q}", stream: high_level, target: true}
    """)
    call = recipe.bindings["q"]
    assert (call.resolver, call.style, call.role, call.camera) == ("emitted_at", "vqa", "user",
                                                                   "observation.images.top")
    assert str(call) == "emitted_at(style=vqa, role=user, camera=observation.images.top)"


def test_malformed_yaml_duplicate_keys_and_empty_file() -> None:
    assert error_of("messages:\n  - {role: user\n").startswith("x.yaml:3: invalid YAML")
    assert error_of("messages: []\nmessages: []\n") == "x.yaml:2: duplicate key 'messages'"
    assert "the recipe is empty" in error_of("# nothing\n")
    assert "invalid YAML" in error_of("a: 1\n---\nb: 2\n")


def test_unsafe_yaml_tags_are_refused() -> None:
    message = error_of("messages: !!python/object/apply:os.system [echo]\n")
    assert message == "x.yaml:1: YAML tag 'tag:yaml.org,2002:python/object/apply:os.system' is not allowed"
    assert "is not allowed" in error_of("description: !!python/name:os.system ''\n")


def test_camera_placeholders_and_camera_map_errors() -> None:
    text = """
        cameras:
          top: observation.images.top
        bindings:
          q: emitted_at(t, style=vqa, role=user, camera=${camera:top})
          a: emitted_at(t, style=vqa, role=assistant, camera=${camera:wrist})
        messages:
          - {role: assistant, content: "${q} ${a}", stream: high_level, target: true}
    """
    assert error_of(text).startswith("x.yaml:5: bindings.a: unknown camera 'wrist'; declare it under `cameras:`")
    fixed = text.replace("${camera:wrist}", "observation.images.side")
    recipe = parse(fixed, camera_map={"top": "cam_high", "observation.images.side": "cam_low"})
    assert {c.camera for c in recipe.bindings.values()} == {"cam_high", "cam_low"}
    assert "cameras must map names" in error_of("cameras: [top]\nmessages: []\n")


def test_a_camera_map_key_the_recipe_does_not_use_warns_and_is_ignored(caplog: pytest.LogCaptureFixture) -> None:
    # One command line serves every recipe: subtask_joint reads no camera, hirobot reads two.
    line = {"top": "observation.images.front", "wrist": "observation.images.hand", "side": "x"}
    with caplog.at_level("WARNING", logger="steerable.recipes.building"):
        for name in ("subtask", "subtask_joint", "subtask_mem"):
            assert load_recipe(name, camera_map=line).camera_keys == set()
        hirobot = load_recipe("hirobot", camera_map=line)
    assert hirobot.camera_keys == {"observation.images.front", "observation.images.hand"}
    warned = [r.getMessage() for r in caplog.records]
    assert len(warned) == 4 and all("does not use" in w and "ignored" in w for w in warned)
    assert "'side'" in warned[-1] and "'top'" not in warned[-1]


@pytest.mark.parametrize("key", ["top", "observation.images.top"])
def test_camera_map_takes_the_recipe_camera_by_name_or_by_its_full_key(key: str) -> None:
    recipe = load_recipe("subtask_mem_vqa_speech", camera_map={key: "observation.images.front"})
    assert recipe.camera_keys == {"observation.images.front", "observation.images.wrist"}
    with pytest.raises(RecipeError, match="binds camera 'top' twice"):
        load_recipe("hirobot", camera_map={"top": "a", "observation.images.top": "b"})


def test_reference_style_recipe_with_literal_camera_keys_is_remapped() -> None:
    recipe = """
        messages:
          - role: user
            stream: high_level
            if_present: vqa_query
            content:
              - {type: image, feature: observation.images.front}
              - {type: text, text: "${vqa_query}"}
          - {role: assistant, content: "${vqa}", stream: high_level, target: true, if_present: vqa}
        bindings:
          vqa_query: "emitted_at(t, style=vqa, role=user, camera='observation.images.front')"
          vqa: emitted_at(t, style=vqa, role=assistant, camera=observation.images.front)
    """
    assert parse(recipe, camera_map={"observation.images.front": "image"}).camera_keys == {"image"}
    assert parse(recipe, camera_map={"front": "image"}).camera_keys == {"image"}  # the short name too


# --- in-code recipes ---------------------------------------------------------------------------


def test_from_dict_errors_name_the_key_path() -> None:
    with pytest.raises(RecipeError) as info:
        Recipe.from_dict({"blend": {"a": {"weight": 1, "messages": [{"role": "user", "content": "x"}]}}})
    assert str(info.value).startswith("<recipe>: blend.a.messages[0]: turn (role 'user') is missing a stream")
    with pytest.raises(RecipeError, match=r"^<recipe>: blend\.a: unknown key 'targt'"):
        Recipe.from_dict({"blend": {"a": {"weight": 1, "targt": True, "messages": SIMPLE_TURNS}}})


def test_direct_construction_is_validated_too() -> None:
    with pytest.raises(RecipeError, match="missing a stream"):
        MessageTurn(role="user", content="x")
    with pytest.raises(RecipeError, match="unsupported role"):
        MessageTurn(role="robot", content="x", stream="high_level")  # type: ignore[arg-type]
    turn = MessageTurn(role="user", content="${task}", stream="low_level")
    with pytest.raises(RecipeError, match="only one|not both"):
        Recipe(messages=(turn,), blend={"a": Recipe(messages=(turn,), weight=1.0)})
    with pytest.raises(RecipeError, match="must set one of"):
        Recipe()
    recipe = Recipe(messages=(turn,), bindings={"p": "active_at(t, style=plan)"})  # type: ignore[dict-item]
    assert recipe.bindings["p"].style == "plan"
