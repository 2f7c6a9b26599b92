"""`steerable run --env lerobot --env.type=pusht`: LeRobot's PushT simulator (gym-pusht), built by
LeRobot's own `make_env`, as a steerable environment: its observations under LeRobot's policy keys,
its task text, its success signal, the end of its episodes, and an evaluation over seeded episodes
in parallel workers that print a success rate."""

from __future__ import annotations

import json

import numpy as np
import pytest

from steerable.cli.main import main
from steerable.errors import ConfigError
from steerable.runtime.environments import EnvSpec, make_env
from steerable.runtime.lerobot.gym_env import LeRobotGymEnv

# PushT's reset state (pusher x, y, T body x, y, angle) whose T lies exactly on the target pose (256, 256, 45°):
# the body's position is offset from the pose PushT reports and judges.
ON_TARGET = [100.0, 100.0, 224.1801948466054, 242.81980515339467, np.pi / 4]


@pytest.fixture(scope="module")
def pusht() -> LeRobotGymEnv:
    env = make_env(EnvSpec("lerobot", {"type": "pusht", "episode_length": "40"}), 10)
    assert isinstance(env, LeRobotGymEnv)
    yield env
    env.close()


def test_pusht_observations_task_and_features(pusht: LeRobotGymEnv) -> None:
    assert (pusht.fps, pusht.robot_type) == (10, "pusht")
    assert pusht.state_names == ("agent_pos_0", "agent_pos_1") and pusht.action_names == ("action_0", "action_1")
    assert pusht.camera_keys == ("observation.image",)  # LeRobot's key for PushT's one camera
    spec = pusht.reset(3)
    assert (spec.task, spec.kind) == ("PushT-v0", "pusht")  # PushT has no task text: its config's task name
    assert pusht.reset(3, "push the T onto the target").task == "push the T onto the target"
    obs = pusht.observe()
    (shape,) = pusht.camera_shapes().values()
    assert obs.images["observation.image"].shape == shape and obs.images["observation.image"].dtype == np.uint8
    assert obs.state.shape == (2,) and np.all((obs.state >= 0) & (obs.state <= 512))
    again = pusht.reset(3)
    assert again == spec and np.array_equal(pusht.observe().state, obs.state)  # seeded
    assert pusht.observe(render=False).images == {}


def test_success_is_the_envs_is_success_and_an_ended_episode_takes_no_actions(pusht: LeRobotGymEnv) -> None:
    pusht.reset(0)
    assert pusht.success() is False and not pusht.episode_over()
    # The T already on its target (PushT's own reset option), the pusher away from it: one step succeeds.
    obs, _ = pusht._vec.reset(seed=[0], options={"reset_to_state": ON_TARGET})
    pusht._obs = {k: v[0] for k, v in obs.items()}
    pusht.send_action(np.array([100.0, 100.0]))
    assert pusht.success() is True and pusht.episode_over()
    frozen = pusht.observe().state.copy()
    pusht.send_action(np.array([400.0, 400.0]))
    assert pusht.steps == 1 and np.array_equal(pusht.observe().state, frozen)  # nothing stepped
    pusht.reset(1)
    assert pusht.success() is False and not pusht.episode_over()


def test_random_actions_run_until_the_episode_ends(pusht: LeRobotGymEnv) -> None:
    from steerable.runtime.evaluation import run_episode
    from steerable.runtime.stack import StackSpec

    result = run_episode(StackSpec(high_level="none", low_level="scripted", fps=10), 5,
                         env=EnvSpec("lerobot", {"type": "pusht", "episode_length": "40"}))
    assert (result.task, result.kind, result.success) == ("PushT-v0", "pusht", False)
    assert result.sim_seconds == pytest.approx(4.0)  # 40 steps at 10 fps: the env's episode length


def test_lerobot_env_flag_mistakes_are_one_line() -> None:
    for options, message in (
        ({"type": "pushtt"}, "--env.type=pushtt: LeRobot knows no such env (did you mean pusht?"),
        ({"type": "pusht", "episode_lenght": "3"}, "--env.episode_lenght: a pusht env has no field episode_lenght "
                                                   "(did you mean --env.episode_length?)"),
        ({"task": "PushT-v0"}, "--env.type is missing"),
    ):
        with pytest.raises(ConfigError) as caught:
            make_env(EnvSpec("lerobot", options), 10)
        assert message in str(caught.value)


def test_eval_episodes_on_pusht_prints_a_success_rate(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["run", "--env", "lerobot", "--env.type=pusht", "--env.episode_length=100", "--high_level", "none",
                 "--low_level", "scripted", "--ctrl_hz", "10", "--eval_episodes", "10", "--workers", "2", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err[-2000:]
    report = json.loads(out)  # stdout is the one JSON object: LeRobot's prints went to stderr
    assert report["episodes"] == 10 and 0.0 <= report["success_rate"] <= 1.0
    assert report["low_level"] == "scripted" and report["difficulty"] is None
    assert report["by_kind"] == {"pusht": {"episodes": 10, "success_rate": report["success_rate"]}}
    assert report["mean_sim_seconds"] == pytest.approx(10.0)  # every episode ran to PushT's own end
