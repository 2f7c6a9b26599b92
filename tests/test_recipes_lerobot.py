"""`steerable recipes export NAME --lerobot` and `recipes lint --lerobot`, without LeRobot installed.

The LeRobot half of the suite (tests/lerobot/test_lerobot_recipes.py) runs the same files through
LeRobot's own loader and renderer; here: what the export writes and says, and what lint tells.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from annotate_helpers import steerable
from steerable.recipes import builtin_recipe_names, load_recipe, parse_recipe
from steerable.recipes.lerobot_check import check_for_lerobot
from steerable.recipes.lerobot_export import export_for_lerobot


@pytest.mark.parametrize("name", builtin_recipe_names())
def test_every_builtin_exports_to_a_file_lerobots_rules_accept(name: str) -> None:
    original = load_recipe(name)
    exported = export_for_lerobot(original, name=name)
    verdict = check_for_lerobot(yaml.safe_load(exported.text))
    assert verdict.accepted, verdict.refusals
    assert not verdict.hazards, verdict.hazards
    again = parse_recipe(exported.text, origin=f"{name}.yaml")  # steerable reads the export too
    assert [n for n, _ in again.components()] == [n for n, _ in original.components()]
    assert [c.weight for _, c in again.components()] == [c.weight for _, c in original.components()]
    assert again.camera_keys == original.camera_keys
    assert not check_for_lerobot(yaml.safe_load(Path(original.origin).read_text())).accepted


def test_the_export_says_what_differs() -> None:
    exported = export_for_lerobot(load_recipe("subtask_mem_vqa_speech"), name="subtask_mem_vqa_speech")
    said = "\n".join(exported.differences)
    assert "blend.low_level_execution: its low_level turn is also a text target" in said
    assert "blend.ask_vqa_top: `route: vqa` dropped" in said and "blend.ask_vqa_wrist: `route: vqa`" in said
    assert "top -> observation.images.top" in said
    assert all(f"# - {d[:40]}" in exported.text for d in exported.differences)  # the file says it too
    data = yaml.safe_load(exported.text)
    assert set(data) == {"blend"}
    flow = data["blend"]["low_level_execution"]["messages"]
    assert flow == [{"role": "user", "content": "${subtask}", "stream": "low_level", "target": True,
                     "if_present": "subtask"}]
    assert "route" not in data["blend"]["ask_vqa_top"]
    unread = data["blend"]["high_level_subtask"]["bindings"]
    assert unread == {"vqa": "emitted_at(t, style=vqa, role=assistant, tool_name=unused)",
                      "vqa_query": "emitted_at(t, style=vqa, role=user, tool_name=unused)"}


def test_export_binds_cameras_and_writes_stdout_or_a_file(tmp_path: Path) -> None:
    shown = steerable("recipes", "export", "hirobot", "--lerobot", "--camera_map", "top=observation.images.front")
    assert shown.returncode == 0, shown.stderr
    assert "camera=observation.images.front" in shown.stdout and "${camera:" not in shown.stdout
    assert "what differs from the steerable recipe" in shown.stderr
    assert "top -> observation.images.front" in shown.stderr
    out = tmp_path / "hirobot_lerobot.yaml"
    written = steerable("recipes", "export", "hirobot", "--lerobot", "--out", str(out))
    assert written.returncode == 0 and written.stdout == ""
    assert out.read_text().startswith("# LeRobot form of steerable recipe `hirobot`")
    linted = steerable("recipes", "lint", str(out), "--lerobot")
    assert linted.returncode == 0, linted.stdout
    assert "loads it" in linted.stdout.splitlines()[-1] and "warning" not in linted.stdout
    refused = steerable("recipes", "export", "hirobot")
    assert refused.returncode == 2 and "add --lerobot" in refused.stderr


def test_lint_lerobot_says_why_lerobot_refuses_a_recipe(tmp_path: Path) -> None:
    result = steerable("recipes", "lint", "hirobot", "--lerobot")
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert "error: key 'description' (steerable's description): LeRobot's recipe has no such field" in lines
    assert ("error: blend.ask_vqa_top: key 'route' (steerable's VQA routing): LeRobot's recipe has no such field"
            in lines)
    assert any("blend.low_level_execution: no `target: true` turn" in line for line in lines)
    assert any(line.startswith("warning: `${camera:NAME}`") for line in lines)
    assert "refuses it; `steerable recipes export hirobot --lerobot` writes a form it accepts" in lines[-1]
    plain = tmp_path / "plain.yaml"
    plain.write_text("messages:\n  - {role: user, content: '${task}', stream: high_level}\n"
                     "  - {role: assistant, content: '${subtask}', stream: high_level, target: true}\n")
    loose = steerable("recipes", "lint", str(plain), "--lerobot")
    assert loose.returncode == 0
    assert "vqa/vqa_query have no camera=" in loose.stdout and "(1 warning(s))" in loose.stdout
    broken = tmp_path / "broken.yaml"
    broken.write_text("messages: [")
    assert steerable("recipes", "lint", str(broken), "--lerobot").returncode == 2


def test_the_rules_refuse_what_lerobots_loader_refuses() -> None:
    turn = {"role": "assistant", "content": "${subtask}", "stream": "high_level", "target": True}
    cases = {
        "no stream": ({"messages": [{"role": "user", "content": "x"}]}, "no stream"),
        "unknown binding": ({"messages": [{**turn, "content": "${subtsk}"}]}, "unknown binding(s) ['subtsk']"),
        "turn typo": ({"messages": [{**turn, "targt": True}]}, "key 'targt' is not a turn field"),
        "no weight": ({"blend": {"a": {"messages": [turn]}}}, "blend.a: a blend component needs a weight"),
        "nested": ({"blend": {"a": {"weight": 1, "blend": {}}}}, "cannot itself define a blend"),
        "empty blend": ({"blend": {}}, "a blend needs at least one component"),
        "not a mapping": ([turn], "the top level must be a mapping"),
    }
    for name, (data, message) in cases.items():
        verdict = check_for_lerobot(data)
        assert any(message in r for r in verdict.refusals), (name, verdict.refusals)
    assert check_for_lerobot({"weight": 3, "messages": [turn]}).accepted  # LeRobot ignores a top-level weight
