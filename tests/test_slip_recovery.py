"""Recovery demonstrations (`make-dataset --slip_rate`): a grasp that slips as the gripper lifts, and the
expert grasping again. The task still succeeds, the actions still replay to the recorded outcome, the
pick subtask spans the slip (so the done head learns that a raised, closed, empty gripper has not
picked), and a rate of 0 leaves every episode as it was."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from policy_helpers import build, one_thread  # noqa: F401  (autouse fixture)
from steerable.cli.main import main
from steerable.dataset import open_dataset
from steerable.policy.data import episode_actions, episode_subtasks
from steerable.synthetic import SimEnv, generate_synthetic, record_episode, simulate_episode
from steerable.synthetic.difficulty import EASY, REALISTIC
from steerable.synthetic.replay import replay_episode
from steerable.synthetic.world import GRASP_THRESHOLD

FPS = 15
SLIPPY = replace(EASY, slip_rate=1.0)


def _slips(states: list) -> list[int]:
    """Frames where a held cube came loose while the fingers stayed closed."""
    return [k + 1 for k, (a, b) in enumerate(zip(states, states[1:], strict=False))
            if a.held is not None and b.held is None and b.gripper.closure >= GRASP_THRESHOLD]


@pytest.mark.parametrize("level", [SLIPPY, replace(REALISTIC, slip_rate=0.5)], ids=["easy", "realistic"])
def test_a_slipped_grasp_is_grasped_again_and_the_actions_replay_to_the_outcome(level: object) -> None:
    env = SimEnv(fps=FPS, cameras=())
    slipped = 0
    for ep in range(16):
        task, rec, truth = record_episode(3, ep, FPS, level, 0.5)
        slips = _slips(rec.demo.states)
        slipped += len(slips)
        if level is SLIPPY:  # every pick slips once (easy never chains a pick into its place)
            assert len(slips) == sum(not s.push for s in task.steps)
        assert truth.outcome.success, task.text
        result = replay_episode(env, truth, rec.action)
        assert result.reproduced and result.max_error < 0.01, result.why()
    assert slipped >= 8


def test_the_pick_spans_the_slip_so_the_done_head_sees_a_raised_empty_gripper_as_not_done(
        tmp_path: Path) -> None:
    root = generate_synthetic(tmp_path / "ds", episodes=2, cameras=("wrist",), seed=1, difficulty=SLIPPY,
                              with_language=True, privileged_state=True, interjection_rate=0.0,
                              camera_shapes="legacy")
    ds = open_dataset(root)
    built = build(ds)
    for ep in range(2):
        _task, demo = simulate_episode(1, ep, FPS, SLIPPY)
        subtasks = episode_subtasks(ds, ep, episode_actions(ds, built.model.cfg, ep))
        for frame in _slips(demo.states):
            k, text = subtasks.active(frame)  # type: ignore[misc]
            assert text.startswith("pick up"), text
            regrasp = next(f for f in range(frame, len(demo.states)) if demo.states[f].held is not None)
            assert subtasks.starts[k + 1][0] > regrasp  # the pick ends only after the second grasp
            raised = [f for f in range(frame, regrasp) if demo.states[f].gripper.z > demo.states[frame].gripper.z + 0.02]
            assert raised and all(subtasks.label(f, text) == 0.0 for f in raised)


def test_a_rate_of_zero_changes_nothing() -> None:
    for ep in range(4):
        a = record_episode(2, ep, FPS, EASY, 0.5)[1]
        b = record_episode(2, ep, FPS, replace(EASY, slip_rate=0.0), 0.5)[1]
        assert np.array_equal(a.action, b.action) and np.array_equal(a.state, b.state)
        assert not _slips(a.demo.states)


def test_make_dataset_takes_the_rate_and_refuses_one_outside_0_1(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    base = ["make-dataset", "synthetic", "--episodes", "2", "--cameras", "wrist", "--difficulty", "easy"]
    assert main([*base, "--out", str(tmp_path / "bad"), "--slip_rate", "1.5"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "--slip_rate" in lines[0]
    assert not (tmp_path / "bad").exists()
    assert main([*base, "--out", str(tmp_path / "ok"), "--slip_rate", "1"]) == 0
    assert "slip rate 1" in capsys.readouterr().out
    ds = open_dataset(tmp_path / "ok")
    closure = ds.read_episode(0, ["observation.state"]).column("observation.state").to_pylist()
    closed = [c[3] >= GRASP_THRESHOLD for c in closure]
    grasps = sum(1 for a, b in zip(closed, closed[1:], strict=False) if b and not a)
    assert grasps >= 2  # the slipped grasp and the one after it
