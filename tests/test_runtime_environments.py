"""The environment registry: session, evaluation and CLI build envs by name; a toy env runs with one line."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from annotate_helpers import REPO
from steerable.control import DescribesScene, Environment, TakesInterjections
from steerable.errors import ConfigError
from steerable.runtime.environments import ENVIRONMENTS, EnvSpec, environment_options, make_env
from steerable.synthetic.env import SimEnv

# The smallest environment: a point on a line that goes where it is sent, with the scripted
# controller it brings along (what `--low_level scripted` runs on it). No scene to describe, no
# interjections: only the contract of steerable.control.Environment.
TOY = '''
import re

import numpy as np

from steerable.control import ActionChunk, EpisodeSpec, Observation


class ToyController:
    name = "toy controller"
    wants_images = False

    def reset(self):
        pass

    def act(self, observation, command):
        found = re.search(r"go to (-?[0-9.]+)", command)
        if found is None:
            return ActionChunk(np.zeros((0, 1), np.float32), error=f"cannot read {command!r}")
        x, goal = float(observation.state[0]), float(found.group(1))
        if abs(goal - x) < 1e-6:
            return ActionChunk(np.zeros((0, 1), np.float32), done=True)
        steps = np.linspace(x, goal, 4)[1:]
        return ActionChunk(steps.astype(np.float32).reshape(-1, 1))


class ToyEnv:
    robot_type = "toy_point"
    state_names = ("x",)
    action_names = ("x",)
    camera_keys = ("observation.images.front",)

    def __init__(self, *, fps=15, goal=0.5):
        self.fps, self.goal = fps, goal
        self.x, self.steps, self.task = 0.0, 0, ""

    def camera_shapes(self):
        return {"observation.images.front": (6, 8, 3)}

    def reset(self, seed, task=None):
        self.x, self.steps = 0.0, 0
        self.task = task if task is not None else f"go to {self.goal + seed / 10}"
        return EpisodeSpec(self.task, "reach")

    def observe(self, *, render=True):
        images = {"observation.images.front": np.zeros((6, 8, 3), np.uint8)} if render else {}
        return Observation(np.array([self.x], np.float32), images, self.steps / self.fps, self.state_names)

    def send_action(self, action):
        self.x = float(np.asarray(action).reshape(-1)[0])
        self.steps += 1

    def success(self):
        found = re.search(r"go to (-?[0-9.]+)", self.task)
        return None if found is None else abs(self.x - float(found.group(1))) < 1e-3

    def close(self):
        pass

    def scripted_controller(self):
        return ToyController()
'''


def _run_toy(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "toy_env.py").write_text(TOY)
    script = textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, {str(tmp_path)!r})
        from steerable.runtime.environments import ENVIRONMENTS
        ENVIRONMENTS["toy"] = "toy_env:ToyEnv"  # the one registry line
        from steerable.cli.main import main
        sys.exit(main(["run", "--env", "toy", *{list(args)!r}]))
        """
    )
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO, timeout=120)


def test_a_toy_environment_runs_a_commands_file_and_an_evaluation_with_one_registry_line(tmp_path: Path) -> None:
    commands = tmp_path / "cmds.txt"
    commands.write_text("/task go to 0.3\n/task go to -0.2\n")
    ran = _run_toy(tmp_path, "--high_level", "none", "--commands", str(commands))
    assert ran.returncode == 0, ran.stdout + ran.stderr
    out = ran.stdout
    assert "low level: toy controller" in out and "scene (seed 0): --env toy" in out
    assert "done: go to 0.3" in out and "done: go to -0.2" in out
    assert out.rstrip().endswith("final (task done)")  # a toy cannot say where things are

    evaluated = _run_toy(tmp_path, "--high_level", "none", "--eval_episodes", "3", "--workers", "1", "--json")
    assert evaluated.returncode == 0, evaluated.stdout + evaluated.stderr
    data = json.loads(evaluated.stdout)
    assert data["episodes"] == 3 and data["success_rate"] == 1.0
    assert data["by_kind"] == {"reach": {"episodes": 3, "success_rate": 1.0}} and data["difficulty"] is None

    # What the toy does not have is refused up front, in one line naming the flag.
    for extra, message in (
        (["--eval_episodes", "2", "--high_level", "none", "--eval_interjections"],
         "--env toy cannot correct a task part way"),
        (["--eval_episodes", "2"], "--high_level scripted: this environment (ToyEnv) has no scripted planner"),
        (["--eval_episodes", "2", "--high_level", "none", "--camera_shapes", "legacy"],
         "--env toy has no option camera_shapes (its options: goal)"),
    ):
        refused = _run_toy(tmp_path, *extra)
        assert refused.returncode == 2, refused.stdout + refused.stderr
        assert message in refused.stderr and len(refused.stderr.strip().splitlines()) == 1, refused.stderr


def test_sim_is_registered_and_takes_its_options_by_name() -> None:
    assert "sim" in ENVIRONMENTS
    env = make_env(EnvSpec("sim", {"camera_shapes": "legacy", "cameras": ("wrist",)}), 10)
    assert isinstance(env, SimEnv) and isinstance(env, Environment)
    assert isinstance(env, DescribesScene) and isinstance(env, TakesInterjections)
    assert env.fps == 10 and env.camera_shapes() == {"observation.images.wrist": (128, 128, 3)}
    episode = env.reset(3)
    assert episode.task and episode.kind in ("single", "2-step", "stack")
    assert environment_options(EnvSpec())["difficulty"] == "easy"
    with pytest.raises(ConfigError, match="--env sim has no option fov"):
        make_env(EnvSpec("sim", {"fov": 90}), 15)
    with pytest.raises(ConfigError, match="--env 'gym': choose one of sim"):
        EnvSpec("gym")
    with pytest.raises(ConfigError, match="--camera_shapes 'wide'"):
        make_env(EnvSpec("sim", {"camera_shapes": "wide"}), 15)
