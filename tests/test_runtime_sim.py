"""The simulator stack end to end: a two-step task, an interjection changing the target, recording."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from annotate_helpers import steerable
from runtime_helpers import recorded_language
from steerable.control import Observation
from steerable.dataset.lerobot import LeRobotDataset
from steerable.runtime.evaluation import evaluate
from steerable.runtime.loop import LoopRates, Runtime
from steerable.runtime.session import Session, SessionOptions, read_commands
from steerable.runtime.stack import StackSpec
from steerable.synthetic.commands import PHRASINGS, Command, CommandError, parse_command
from steerable.synthetic.controller import ScriptedController
from steerable.synthetic.env import SimEnv, describe_location
from steerable.synthetic.tasks import PUSH_DISTANCE, Step, step_satisfied

TASK = "put the red cube in the left bin, then the orange cube in the left bin"


def test_two_step_task_with_an_interjection_ends_where_the_operator_said(tmp_path: Path) -> None:
    commands = tmp_path / "commands.txt"
    commands.write_text("@3s no, the right bin\n/ask where is the red cube?\n")
    record = tmp_path / "rec"
    session = Session(SessionOptions(task=TASK, seed=7, record=record, rates=LoopRates(ctrl_hz=15)))
    scene = session.env.world.scene
    assert {r.name: r.center[0] < 0.2 for r in scene.receptacles} == {"blue bin": True, "yellow bin": False}
    session.run_commands(read_commands(commands))
    assert session.close() == record
    world = session.env.world
    # Checked from the simulator's state: the corrected cube is in the right bin, the other as asked.
    assert step_satisfied(world, Step("red cube", "yellow bin"))
    assert step_satisfied(world, Step("orange cube", "blue bin"))
    assert world.held is None and session.runtime.state.done
    assert describe_location(world, "red cube") == "The red cube is in the yellow bin."

    persistent, events, problems = recorded_language(record)
    assert problems == []
    # The interjection and the spoken reply sit on the frame where they happened: 3 s at 15 fps.
    at_3s = events[3.0]
    assert {"role": "user", "content": "no, the right bin", "style": "interjection", "camera": None,
            "tool_calls": None} in at_3s
    says = [r for r in at_3s if r["tool_calls"]]
    assert says[0]["tool_calls"][0]["function"]["name"] == "say"
    assert "yellow bin" in says[0]["tool_calls"][0]["function"]["arguments"]["text"]
    # The question asked at the end is a vqa pair on the top camera, answered from the final state.
    (asked_at,) = set(events) - {3.0}
    vqa = {r["role"]: r for r in events[asked_at]}
    assert vqa["user"]["content"] == "where is the red cube?" and vqa["user"]["style"] == "vqa"
    assert vqa["assistant"]["content"] == "The red cube is in the yellow bin."
    assert vqa["user"]["camera"] == vqa["assistant"]["camera"] == "observation.images.top"
    subtasks = [(r["timestamp"], r["content"]) for r in persistent if r["style"] == "subtask"]
    assert subtasks[0] == (0.0, "pick up the red cube")
    assert (3.0, "place the red cube in the yellow bin") in subtasks
    assert "pick up the orange cube" in [c for _, c in subtasks]
    assert subtasks[-1][1] == "place the orange cube in the blue bin"
    assert [r["content"] for r in persistent if r["style"] == "task_aug"] == [TASK]
    assert any(r["style"] == "plan" for r in persistent) and any(r["style"] == "memory" for r in persistent)

    info = steerable("info", str(record), "--json")
    assert info.returncode == 0, info.stderr
    rendered = steerable("render", str(record), "--recipe", "subtask_mem_vqa_speech", "--episode", "0")
    assert rendered.returncode == 0, rendered.stderr
    assert "place the red cube in the yellow bin" in rendered.stdout
    # The simulator's truth rides along, so `steerable eval` scores the recording (here: against itself).
    scored = steerable("eval", str(record), "--json", "--resamples", "0", "--labels", "exact")
    assert scored.returncode == 0, scored.stderr
    report = json.loads(scored.stdout)
    assert report["gold_kind"] == "ground_truth" and report["episodes"] == 1


def test_reset_and_new_tasks_start_new_recorded_episodes(tmp_path: Path) -> None:
    record = tmp_path / "rec"
    session = Session(SessionOptions(task="put the red cube in the left bin", seed=7, record=record))
    commands = tmp_path / "c.txt"
    commands.write_text("/reset 3\n/task put the orange cube in the blue bin\n")  # seed 3 has both
    first_scene = session.describe_scene()
    session.run_commands(read_commands(commands))
    assert session.describe_scene() != first_scene and session.seed == 3
    session.close()
    ds = LeRobotDataset(record)
    assert ds.info.total_episodes == 2
    for episode, task in ((0, "put the red cube in the left bin"), (1, "put the orange cube in the blue bin")):
        persistent, _, problems = recorded_language(record, episode)
        assert problems == [] and [r["content"] for r in persistent if r["style"] == "task_aug"] == [task]


def test_the_controller_reports_commands_it_cannot_parse() -> None:
    env = SimEnv()
    env.reset(7, "")
    scene = env.world.scene
    assert parse_command("Pick up the red cube.", scene).cube == "red cube"
    assert parse_command("place it in the right bin", scene).target == "yellow bin"
    assert parse_command("put it on the orange cube", scene).stack
    with pytest.raises(CommandError, match="no 'green cube' in this scene"):
        parse_command("pick up the green cube", scene)
    chunk = ScriptedController().act(env.observe(render=False), "do a backflip")
    assert len(chunk.actions) == 0 and "cannot parse command 'do a backflip'" in chunk.error
    chunk = ScriptedController().act(env.observe(render=False), "place it in the blue bin")
    assert "gripper is empty" in chunk.error


def test_the_synthetic_phrasings_are_the_controller_grammar() -> None:
    env = SimEnv()
    env.reset(7, "")
    scene = env.world.scene
    examples = {
        "pick up the red cube": Command("pick", cube="red cube"),
        "place the red cube in the blue bin": Command("place", cube="red cube", target="blue bin"),
        "place it in the yellow bin": Command("place", target="yellow bin"),
        "place the red cube on the pink cube": Command("place", cube="red cube", target="pink cube", stack=True),
        "place it on the pink cube": Command("place", target="pink cube", stack=True),
        "push the red cube left": Command("push", cube="red cube", direction="left"),
        "open the gripper": Command("open"),
        "close the gripper": Command("close"),
        "go home": Command("home"),
    }
    assert len(PHRASINGS) == len(examples)  # every phrasing of steerable.synthetic.commands is covered
    for text, expected in examples.items():
        assert parse_command(text, scene) == expected, text


def test_push_moves_the_cube_the_push_distance_that_way() -> None:
    env = SimEnv()
    env.reset(7, "")
    rt = Runtime(env, ScriptedController(), None, rates=LoopRates(ctrl_hz=15))
    start = env.world.positions[env.world.scene.cube_index("purple cube")]
    rt.submit("task", "push the purple cube back")
    rt.run(until=lambda: rt.frame > 1 and rt.idle, max_ticks=15 * 30)
    end = env.world.positions[env.world.scene.cube_index("purple cube")]
    assert rt.state.done and end[1] - start[1] == pytest.approx(PUSH_DISTANCE, abs=0.005)
    assert end[0] == pytest.approx(start[0], abs=0.003) and env.world.gripper.z > 0.1
    assert step_satisfied(env.world, Step("purple cube", "back", push=True), env.start)


def test_env_renders_cameras_and_steps_like_the_dataset() -> None:
    env = SimEnv(cameras=("top", "wrist"))
    spec = env.reset(3)
    obs = env.observe()
    assert isinstance(obs, Observation) and obs.state.shape == (4,)
    assert obs.images["observation.images.top"].shape == (160, 224, 3)
    assert obs.images["observation.images.wrist"].shape == (160, 224, 3)  # one shape for both cameras
    assert env.camera_shapes() == {k: v.shape for k, v in obs.images.items()}
    legacy = SimEnv(camera_shapes="legacy")
    legacy.reset(3)
    assert legacy.observe().images["observation.images.wrist"].shape == (128, 128, 3)
    assert legacy.camera_shapes()["observation.images.wrist"] == (128, 128, 3)
    assert env.observe(render=False).images == {}
    env.send_action(np.array([0.1, 0.1, 0.05, 0.0]))
    assert env.observe(render=False).state[:3] == pytest.approx([0.1, 0.1, 0.05])
    assert env.success() is False and spec.steps


def test_eval_realistic_tasks_with_pushes_and_long_tasks() -> None:
    report = evaluate(StackSpec(), 6, seed=1, interjections=True, workers=2, difficulty="realistic")
    assert report.success_rate == 1.0
    assert {e.kind for e in report.episodes} & {"push", "3-step", "4-step"}


def test_eval_six_episodes_with_and_without_interjections() -> None:
    plain = evaluate(StackSpec(), 6, seed=100, workers=2)
    assert plain.success_rate == 1.0 and len(plain.episodes) == 6
    assert all(e.interjection is None for e in plain.episodes)
    corrected = evaluate(StackSpec(), 6, seed=100, interjections=True, workers=2)
    assert corrected.success_rate == 1.0
    # Said while the cube is carried, in the synthetic data's phrasings, naming the new place.
    assert all(e.interjection for e in corrected.episodes)
    assert len({e.interjection.split()[0] for e in corrected.episodes if e.interjection}) > 1
    data = corrected.to_json()
    assert data["episodes"] == 6 and data["by_interjection"]["with"]["episodes"] == 6
