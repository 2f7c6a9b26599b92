"""Oracle language (`make-dataset synthetic --with_language`): valid rows, renderable, and redirect
interjections whose trajectories really follow the change."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from steerable.dataset import open_dataset
from steerable.language import validate_rows
from steerable.synthetic import read_ground_truth, simulate_episode
from steerable.synthetic.commands import parse_command
from steerable.synthetic.oracle import memory_text, plan_text
from steerable.synthetic.tasks import Step

FPS = 15
SEED = 11


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).parent / "steerable"
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "steerable.cli.main"]
    return subprocess.run([*cmd, *args], capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def oracle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("oracle") / "ds"
    made = _cli(
        "make-dataset", "synthetic", "--out", str(out), "--episodes", "4", "--seed", str(SEED),
        "--with_language", "--interjection_rate", "0.5",
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    assert "with oracle language" in made.stdout and "realistic" in made.stdout
    return out


def _language(root: Path, episode: int) -> tuple[list[dict], list[tuple[float, dict]], list[float]]:
    ds = open_dataset(root)
    table = ds.read_episode(episode, ["timestamp", "language_persistent", "language_events"])
    stamps = table.column("timestamp").to_pylist()
    persistent = table.column("language_persistent")[0].as_py()
    events = [
        (t, row)
        for t, rows in zip(stamps, table.column("language_events").to_pylist(), strict=True)
        for row in rows or []
    ]
    for _, row in events:
        row["tool_calls"] = [json.loads(c) for c in row["tool_calls"] or []] or None
    for row in persistent:
        row["tool_calls"] = None
    return persistent, events, stamps


def test_rows_validate_and_follow_the_ground_truth(oracle: Path) -> None:
    ds = open_dataset(oracle)
    truth = read_ground_truth(oracle)
    info = json.loads((oracle / "meta/info.json").read_text())
    assert [t["function"]["name"] for t in info["tools"]] == ["say"]
    assert {"language_persistent", "language_events"} <= set(info["features"])
    interjected = 0
    for ep in ds.episodes:
        persistent, events, stamps = _language(oracle, ep.episode_index)
        assert validate_rows(persistent, events, frame_timestamps=stamps, cameras=ds.camera_keys) == []
        gt = truth[ep.episode_index]
        subtasks = [(r["timestamp"], r["content"]) for r in persistent if r["style"] == "subtask"]
        assert subtasks == [(s.start, s.text) for s in gt.subtasks]
        assert all(parse_command(text) is not None for _, text in subtasks)
        plans = [r for r in persistent if r["style"] == "plan"]
        assert [p["timestamp"] for p in plans] == [s.start for s in gt.subtasks], "one plan per subtask start"
        for plan, (_, current) in zip(plans, subtasks, strict=True):
            assert plan["content"].splitlines()[0] == f"1. {current}", (
                "the plan starts with the current subtask"
            )
        redirect_times = {i.time for i in gt.interjections}
        memories = [r["timestamp"] for r in persistent if r["style"] == "memory"]
        assert memories == [s.start for s in gt.subtasks[1:] if s.start not in redirect_times]
        for turn in gt.interjections:
            interjected += 1
            at = [row for t, row in events if t == turn.time]
            said = [r for r in at if r["style"] == "interjection"]
            spoken = [r for r in at if r["style"] is None and r["tool_calls"][0]["function"]["name"] == "say"]
            assert len(said) == 1 and said[0]["role"] == "user" and turn.new_target in said[0]["content"]
            assert (
                len(spoken) == 1
                and turn.new_target in spoken[0]["tool_calls"][0]["function"]["arguments"]["text"]
            )
            plan_here = [p["content"] for p in plans if p["timestamp"] == turn.time]
            assert plan_here and f"in the {turn.new_target}" in plan_here[0].splitlines()[0]
    assert interjected >= 1, "the fixture should hold at least one redirect"


def test_rows_render_with_the_builtin_recipe(oracle: Path) -> None:
    truth = read_ground_truth(oracle)
    episode = next(e for e, t in sorted(truth.items()) if t.interjections)
    result = _cli("render", str(oracle), "--recipe", "subtask_mem_vqa_speech", "--episode", str(episode))
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "pick up the" in out and "user_interjection_response" in out
    turn = truth[episode].interjections[0]
    assert turn.new_target in out, "the interjection and its reply render at their frame"


def test_redirected_trajectories_turn_toward_the_new_receptacle() -> None:
    turned = 0
    for ep in range(20):
        task, demo = simulate_episode(SEED, ep, FPS, "realistic", interjection_rate=1.0)
        for r in demo.redirects:
            turned += 1
            scene = demo.states[0].scene
            old = np.array(scene.receptacle(r.old_target).center)
            new = np.array(scene.receptacle(r.new_target).center)
            xy = demo.observations()[:, :2]
            before = xy[max(0, r.frame - 8)], xy[r.frame]
            # Heading for the old receptacle before the interjection...
            assert np.linalg.norm(before[1] - old) < np.linalg.norm(before[0] - old) - 0.01
            # ...and the cube ends in the new one, nowhere near the old one.
            final = demo.states[-1]
            x, y, z = final.positions[scene.cube_index(r.cube)]
            x0, y0, x1, y1 = scene.receptacle(r.new_target).rect
            assert x0 < x < x1 and y0 < y < y1 and z == 0.0
            assert np.linalg.norm(np.array([x, y]) - new) < np.linalg.norm(np.array([x, y]) - old)
            starts = [f for f, _ in demo.subtasks]
            assert r.frame in starts, "the new placement is a subtask starting at the interjection"
    assert turned >= 10


def test_memory_and_plan_phrasing() -> None:
    done = [
        "pick up the red cube",
        "place the red cube in the blue bin",
        "push the green cube left",
        "pick up the cyan cube",
    ]
    assert memory_text(done) == (
        "The red cube is in the blue bin; the green cube was pushed left; holding the cyan cube."
    )
    assert memory_text([]) == "Nothing done yet."
    assert plan_text(["a", "b"]) == "1. a\n2. b"
    assert Step("red cube", "blue bin", redirect="grey bin").final_target == "grey bin"


def test_oracle_language_is_deterministic(tmp_path: Path) -> None:
    from steerable.synthetic import generate_synthetic

    kwargs = {"episodes": 2, "cameras": ("top",), "seed": 3, "with_language": True, "interjection_rate": 1.0}
    first = generate_synthetic(tmp_path / "a", **kwargs)  # type: ignore[arg-type]
    second = generate_synthetic(tmp_path / "b", **kwargs)  # type: ignore[arg-type]
    for name in ("data/chunk-000/file-000.parquet", "meta/info.json", "meta/steerable_ground_truth.json"):
        assert (first / name).read_bytes() == (second / name).read_bytes(), name
    assert read_ground_truth(first)[0].interjections, "rate 1.0 redirects every episode that has a bin step"


def test_a_stack_is_redirected_onto_another_cube_where_the_task_has_no_bin_step() -> None:
    """Stacking tasks are corrected too ("no, put it on the orange cube instead"): the expert turns to
    a cube no step involves, the oracle says so in a stack phrasing, and its plan names the new cube."""
    from steerable.synthetic.generate import record_episode
    from steerable.synthetic.oracle import STACK_INTERJECTION_PHRASES, STACK_REPLY_PHRASES, episode_language

    stacks = 0
    for ep in range(24):
        task, rec, truth = record_episode(SEED, ep, FPS, "easy", 1.0, [])
        if not all(s.stack for s in task.steps):
            continue
        (step,) = task.steps
        assert step.redirect is not None and step.redirect not in (step.cube, step.target)
        stacks += 1
        final = rec.demo.states[-1]
        x, y, z = final.positions[final.scene.cube_index(step.cube)]
        tx, ty, tz = final.positions[final.scene.cube_index(step.redirect)]
        assert abs(x - tx) < 0.01 and abs(y - ty) < 0.01 and z == pytest.approx(tz + 0.04)
        (turn,) = truth.interjections
        lang = episode_language(task, truth, np.random.default_rng(ep))
        said = next(r["content"] for _, r in lang.events if r["style"] == "interjection")
        reply = next(r["tool_calls"][0]["function"]["arguments"]["text"] for _, r in lang.events if r["tool_calls"])
        values = {"cube": step.cube, "old": step.target, "new": step.redirect}
        assert said in {p.format(**values) for p in STACK_INTERJECTION_PHRASES}
        assert reply in {p.format(**values) for p in STACK_REPLY_PHRASES}
        plan = next(r["content"] for r in lang.persistent if r["style"] == "plan" and r["timestamp"] == turn.time)
        assert plan == f"1. place the {step.cube} on the {step.redirect}"
        assert parse_command(plan[3:]).stack
    assert stacks >= 3
