"""steerable's recipes in LeRobot's own recipe loader and renderer (the real lerobot, never a model of it).

Every built-in, exported with `steerable recipes export NAME --lerobot`, loads in LeRobot's
`load_recipe` and renders in LeRobot's `render_sample` on frames that stop the raw defaults (VQA
for two cameras on one frame), sample for sample as steerable renders the same file with
`--compat lerobot`. steerable's LeRobot rules (`recipes lint --lerobot` without LeRobot) agree with
LeRobot's loader on the built-ins, their exports and a set of hand-written files.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest
import yaml
from lerobot.configs.recipe import load_recipe as lerobot_load_recipe
from lerobot.datasets.language_render import render_sample as lerobot_render_sample

from steerable.cli.main import main
from steerable.recipes import RenderOptions, builtin_recipe_names, load_recipe, render_sample_reference
from steerable.recipes.lerobot_check import check_for_lerobot

BUILTINS = builtin_recipe_names()
BUILTIN_DIR = Path(__file__).resolve().parents[2] / "src" / "steerable" / "recipes" / "builtin"
TOP, WRIST = "observation.images.top", "observation.images.wrist"
SAY = [{"type": "function", "function": {"name": "say", "arguments": {"text": "Sure, the bin."}}}]


def _row(style: str | None, content: str | None, t: float | None = None, *, role: str = "assistant",
         camera: str | None = None, tool_calls: list | None = None) -> dict:
    """A persistent row (with its timestamp `t`) or an event row (none), fields in LeRobot's order."""
    timed = {} if t is None else {"timestamp": t}
    return {"role": role, "content": content, "style": style, **timed, "camera": camera, "tool_calls": tool_calls}


PERSISTENT = [
    _row("plan", "pick the cube\nplace it", 0.0), _row("subtask", "pick the cube", 0.0),
    _row("memory", "nothing yet", 0.0), _row("subtask", "place it", 2.0), _row("memory", "cube picked", 2.0),
    _row("plan", "place it in the bin", 3.0), _row("motion", "move left", 0.0), _row("motion", "lower", 2.0),
]
EVENTS = {  # t -> the frame's event rows
    0.5: [],
    1.0: [_row("vqa", "how many cubes?", role="user", camera=TOP), _row("vqa", '{"count": 1}', camera=TOP),
          _row("vqa", "is the gripper open?", role="user", camera=WRIST), _row("vqa", '{"open": true}', camera=WRIST)],
    2.0: [_row("vqa", "where is the bin?", role="user", camera=TOP), _row("vqa", '{"point": [3, 4]}', camera=TOP)],
    3.0: [_row("interjection", "use the bin instead", role="user"), _row(None, None, tool_calls=SAY)],
    4.0: [],
}


def _run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("exported")
    paths = {}
    for name in BUILTINS:
        code, _, err = _run("recipes", "export", name, "--lerobot", "--out", str(folder / f"{name}.yaml"))
        assert code == 0, err
        paths[name] = folder / f"{name}.yaml"
    return paths


@pytest.mark.parametrize("name", BUILTINS)
def test_every_builtin_exported_loads_in_lerobots_load_recipe(name: str, exported: dict[str, Path]) -> None:
    recipe = lerobot_load_recipe(exported[name])
    ours = load_recipe(str(exported[name]))  # the same file serves steerable too
    components = list(recipe.blend or {"": recipe})
    assert components == [n for n, _ in ours.components()]
    with pytest.raises((TypeError, ValueError)):  # the built-in as written is steerable's, not LeRobot's
        lerobot_load_recipe(BUILTIN_DIR / f"{name}.yaml")


@pytest.mark.parametrize("name", BUILTINS)
def test_exported_recipes_render_in_lerobot_as_steerable_renders_them(name: str, exported: dict[str, Path]) -> None:
    theirs, ours = lerobot_load_recipe(exported[name]), load_recipe(str(exported[name]))
    rendered = 0
    for t, events in EVENTS.items():
        for sample_idx in range(40):
            got = lerobot_render_sample(recipe=theirs, persistent=PERSISTENT, events=events, t=t,
                                        sample_idx=sample_idx, task="put the cube in the bin")
            mine = render_sample_reference(ours, persistent=PERSISTENT, events=events, t=t, sample_idx=sample_idx,
                                           task="put the cube in the bin", options=RenderOptions(compat="lerobot"))
            if got is None:  # LeRobot 0.6.1 drops a sample without a target; newer renderers keep its flow part
                assert mine is None or not mine.target_message_indices, (t, sample_idx, mine)
                continue
            rendered += 1
            assert mine is not None and mine.to_dict() == got, (t, sample_idx)
    assert rendered >= 40, rendered


def test_without_the_rebinding_lerobot_stops_on_a_two_camera_vqa_frame(exported: dict[str, Path], tmp_path: Path
                                                                        ) -> None:
    text = exported["subtask"].read_text()
    raw = tmp_path / "raw.yaml"
    raw.write_text("\n".join(line for line in text.splitlines() if "tool_name=unused" not in line) + "\n")
    recipe = lerobot_load_recipe(raw)
    with pytest.raises(ValueError, match="Ambiguous resolver"):
        lerobot_render_sample(recipe=recipe, persistent=PERSISTENT, events=EVENTS[1.0], t=1.0, sample_idx=0,
                              task="put the cube in the bin")


HAND_WRITTEN = {
    "minimal": {"messages": [{"role": "user", "content": "${task}", "stream": "high_level"},
                             {"role": "assistant", "content": "${subtask}", "stream": "high_level", "target": True}]},
    "flow_only": {"messages": [{"role": "user", "content": "${subtask}", "stream": "low_level"}]},
    "no_stream": {"messages": [{"role": "assistant", "content": "${subtask}", "target": True}]},
    "unknown_binding": {"messages": [{"role": "assistant", "content": "${subtsk}", "stream": "high_level",
                                      "target": True}]},
    "typo_key": {"messages": [{"role": "assistant", "content": "x", "stream": "high_level", "targt": True}]},
    "route": {"blend": {"a": {"weight": 1.0, "route": "vqa", "messages": [
        {"role": "assistant", "content": "${vqa}", "stream": "high_level", "target": True}]}}},
    "no_weight": {"blend": {"a": {"messages": [
        {"role": "assistant", "content": "x", "stream": "high_level", "target": True}]}}},
    "zero_weight": {"blend": {"a": {"weight": 0, "messages": [
        {"role": "assistant", "content": "x", "stream": "high_level", "target": True}]}}},
    "both": {"messages": [], "blend": {}},
    "tool_call_target": {"messages": [{"role": "assistant", "stream": "high_level", "target": True,
                                       "tool_calls_from": "speech"}]},
    "top_level_weight": {"weight": 2.0, "messages": [
        {"role": "assistant", "content": "x", "stream": "low_level", "target": True}]},
    "if_absent": {"messages": [
        {"role": "assistant", "content": "${plan}", "stream": "high_level", "target": True, "if_absent": "speech"}]},
    "description": {"description": "x", "messages": [
        {"role": "assistant", "content": "x", "stream": "high_level", "target": True}]},
}


def test_steerables_lerobot_rules_agree_with_lerobots_load_recipe(exported: dict[str, Path], tmp_path: Path) -> None:
    files = [BUILTIN_DIR / f"{n}.yaml" for n in BUILTINS] + list(exported.values())
    for name, data in HAND_WRITTEN.items():
        files.append(tmp_path / f"{name}.yaml")
        files[-1].write_text(json.dumps(data))  # JSON is YAML
    verdicts = {}
    for path in files:
        try:
            lerobot_load_recipe(path)
            loads = True
        except (TypeError, ValueError):
            loads = False
        verdict = check_for_lerobot(yaml.safe_load(path.read_text()))
        verdicts[f"{path.parent.name}/{path.name}"] = loads
        assert verdict.accepted == loads, (path.name, verdict.refusals)
    accepted = {n for n, loads in verdicts.items() if loads}
    hand = {f"{tmp_path.name}/{n}.yaml" for n in ("minimal", "tool_call_target", "top_level_weight")}
    assert accepted == {f"{p.parent.name}/{p.name}" for p in exported.values()} | hand, verdicts


def test_lint_lerobot_asks_the_installed_lerobot(exported: dict[str, Path]) -> None:
    code, out, _ = _run("recipes", "lint", "hirobot", "--lerobot")
    assert code == 1
    assert "error: LeRobot 0.6.1 (installed) load_recipe: ValueError: Message recipes must contain" in out
    assert "recipes export hirobot --lerobot" in out.splitlines()[-1]
    code, out, _ = _run("recipes", "lint", str(exported["hirobot"]), "--lerobot")
    assert code == 0, out
    assert out.splitlines()[-1].endswith("LeRobot 0.6.1 (installed) loads it")
