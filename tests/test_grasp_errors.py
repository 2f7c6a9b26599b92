"""benchmarks/grasp_errors.py: where a camera policy's grasps go wrong (the goal, or the low level's aim)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from policy_helpers import steerable_cli

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "grasp_errors.py"
sys.path.insert(0, str(SCRIPT.parent))

import grasp_errors  # noqa: E402
from steerable.synthetic.env import SimEnv  # noqa: E402


def _probe_on(oracle: str, command: str) -> tuple[grasp_errors.Probe, SimEnv]:
    env = SimEnv()
    env.reset(3)
    probe = grasp_errors.Probe(oracle)
    probe.env, probe.command = env, command
    probe.span = (np.array([0.0, 0.0, 0.0, 0.0]), np.array([0.56, 0.40, 0.2, 1.0]))
    return probe, env


def test_the_oracle_reads_the_simulators_goal_and_none_keeps_the_heads() -> None:
    probe, env = _probe_on("pick", "")
    world = env.world
    assert world is not None
    cube = world.scene.cubes[0].name
    probe.command = f"pick up the {cube}"
    estimate = torch.zeros(1, 3)
    goal = probe.read(estimate)
    x, y, _ = world.positions[0]
    assert probe.goal is not None
    np.testing.assert_allclose(probe.goal, [x, y], atol=1e-5)
    assert torch.equal(estimate, torch.zeros(1, 3)) and goal[0, 2] == 0  # a copy; z stays the head's
    probe.oracle = "none"
    assert torch.equal(probe.read(estimate), estimate)
    np.testing.assert_allclose(probe.goal, [0.28, 0.20], atol=1e-5)  # the middle of the range
    probe.oracle = "pick"
    receptacle = world.scene.receptacles[0].name
    probe.command = f"place the {cube} in the {receptacle}"
    assert torch.equal(probe.read(estimate), estimate)  # a place keeps the head's estimate unless `both`


def test_a_grasp_is_measured_from_the_named_cube() -> None:
    from steerable.synthetic.world import Gripper

    probe, env = _probe_on("none", "")
    world = env.world
    assert world is not None
    cube = world.scene.cubes[1].name
    probe.command, probe.goal = f"pick up the {cube}", np.array([0.1, 0.1])
    x, y, _ = world.positions[1]
    probe.grasp(world, Gripper(x + 0.03, y - 0.04, 0.02, 1.0), held=False)
    probe.command = "place it in the blue bin"
    probe.grasp(world, Gripper(x, y, 0.02, 1.0), held=True)  # not a pick: not counted
    assert len(probe.grasps) == 1
    grasp = probe.grasps[0]
    assert grasp["grip_cube"] == pytest.approx(0.05) and grasp["held"] == 0.0
    assert grasp["dx"] == pytest.approx(0.03) and grasp["dy"] == pytest.approx(-0.04)


def test_a_release_is_measured_along_the_way_from_where_the_place_began() -> None:
    """A place that began 10 cm from its spot and let go 3 cm before it (1 cm aside) came up 3 cm short."""
    from dataclasses import replace

    from steerable.synthetic.world import Gripper

    probe, env = _probe_on("none", "")
    world = env.world
    assert world is not None
    moved, target = world.scene.cubes[0].name, world.scene.cubes[1].name
    sx, sy, _ = world.positions[1]
    probe.command = f"place the {moved} on the {target}"
    probe.track(Gripper(sx + 0.10, sy, 0.12, 1.0))
    probe.track(Gripper(sx + 0.08, sy, 0.12, 1.0))  # the same command: its start stays
    let_go = Gripper(sx + 0.03, sy + 0.01, 0.06, 0.0)
    positions = list(world.positions)
    positions[0] = (let_go.x, let_go.y, 0.0)
    before = replace(world, gripper=replace(let_go, closure=1.0), held=0)
    probe.release(before, replace(world, gripper=let_go, positions=tuple(positions), held=None), 0)
    release = probe.releases[-1]
    assert release["stack"] == 1.0 and release["took"] == 0.0
    assert release["short"] == pytest.approx(0.03) and release["across"] == pytest.approx(0.01)
    assert release["travelled"] == pytest.approx(0.7)
    probe.command = f"pick up the {moved}"
    probe.track(Gripper(sx + 0.05, sy, 0.02, 1.0))
    probe.command = f"place the {moved} on the {target}"  # again: a new start, where the gripper is now
    probe.track(Gripper(sx + 0.01, sy, 0.12, 1.0))
    probe.release(before, replace(world, gripper=let_go, positions=tuple(positions), held=None), 0)
    assert len(probe.releases) == 2 and "short" not in probe.releases[-1]  # 1 cm from its spot: no direction


def test_the_benchmark_runs_a_camera_checkpoint_and_prints_its_result(tmp_path: Path) -> None:
    data, out = tmp_path / "ds", tmp_path / "ckpt"
    made = steerable_cli("make-dataset", "synthetic", "--out", str(data), "--episodes", "2", "--difficulty", "easy",
                         "--with_language")
    assert made.returncode == 0, made.stderr
    trained = steerable_cli("train", "--dataset", str(data), "--output_dir", str(out), "--steps", "1",
                            "--batch_size", "4", "--goal_pretrain_steps", "1", "--goal_pretrain_items", "64",
                            "--no_progress")
    assert trained.returncode == 0, trained.stderr
    run = subprocess.run([sys.executable, str(SCRIPT), "--policy", str(out), "--episodes", "1", "--max_seconds", "2",
                          "--oracle", "both"], capture_output=True, text=True, timeout=240,
                         env={"OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"})
    assert run.returncode == 0, run.stderr[-2000:]
    assert "RESULT oracle=both success 0/1" in run.stdout
