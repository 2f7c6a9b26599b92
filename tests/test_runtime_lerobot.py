"""LeRobot adapters, exercised with small stand-ins of ours that implement LeRobot's interfaces."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from steerable.runtime.lerobot import LeRobotPolicyController, LeRobotRobotEnv
from steerable.runtime.loop import LoopRates, Runtime


class StandInRobot:
    """LeRobot's `Robot` API: features, connect, get_observation, send_action, disconnect."""

    observation_features = {"shoulder.pos": float, "gripper.pos": float, "front": (6, 8, 3)}
    action_features = {"shoulder.pos": float, "gripper.pos": float}

    def __init__(self) -> None:
        self.is_connected = False
        self.sent: list[dict[str, float]] = []
        self.pose = {"shoulder.pos": 10.0, "gripper.pos": 0.5}

    def connect(self) -> None:
        self.is_connected = True

    def get_observation(self) -> dict[str, Any]:
        return {**self.pose, "front": np.full((6, 8, 3), 255, dtype=np.uint8)}

    def send_action(self, action: dict[str, float]) -> dict[str, float]:
        self.sent.append(action)
        self.pose = dict(action)
        return action

    def disconnect(self) -> None:
        self.is_connected = False


class StandInPolicy:
    """LeRobot's policy interface: reset, select_action (one action per call)."""

    def __init__(self) -> None:
        self.batches: list[dict[str, Any]] = []
        self.resets = 0

    def reset(self) -> None:
        self.resets += 1

    def select_action(self, batch: dict[str, Any]) -> torch.Tensor:
        self.batches.append(batch)
        return batch["observation.state"] + 1.0


class StandInChunkPolicy(StandInPolicy):
    def predict_action_chunk(self, batch: dict[str, Any]) -> torch.Tensor:
        self.batches.append(batch)
        return batch["observation.state"][:, None, :] + torch.arange(1, 4, dtype=torch.float32)[None, :, None]


def test_policy_and_robot_adapters_run_in_the_loop_conditioned_on_the_task() -> None:
    robot, policy = StandInRobot(), StandInPolicy()
    env = LeRobotRobotEnv(robot, fps=10)
    assert robot.is_connected and env.state_names == ("shoulder.pos", "gripper.pos")
    rt = Runtime(env, LeRobotPolicyController(policy), None, rates=LoopRates(ctrl_hz=10, chunk_hz=10))
    rt.submit("task", "wave hello")
    rt.run(max_ticks=3)
    batch = policy.batches[0]
    assert batch["task"] == ["wave hello"]
    assert batch["observation.state"].shape == (1, 2) and batch["observation.state"].dtype == torch.float32
    image = batch["observation.images.front"]
    assert image.shape == (1, 3, 6, 8) and float(image.max()) == 1.0
    assert robot.sent[0] == {"shoulder.pos": 11.0, "gripper.pos": 1.5}
    assert len(robot.sent) == 3 and robot.sent[-1]["shoulder.pos"] == 13.0
    # An interjection in direct-task mode becomes the command the policy is conditioned on.
    rt.submit("interject", "wave slower")
    rt.tick()
    assert policy.batches[-1]["task"] == ["wave slower"]
    env.close()
    assert not robot.is_connected


def test_chunking_policies_fill_the_queue_once_per_chunk() -> None:
    robot, policy = StandInRobot(), StandInChunkPolicy()
    rt = Runtime(LeRobotRobotEnv(robot, fps=10), LeRobotPolicyController(policy), None,
                 rates=LoopRates(ctrl_hz=10, chunk_hz=2))
    rt.submit("task", "wave")
    rt.run(max_ticks=3)
    assert len(policy.batches) == 1  # one chunk of three actions, dispatched one per tick
    assert [a["shoulder.pos"] for a in robot.sent] == [11.0, 12.0, 13.0]
    rt.submit("task", "another task")
    rt.tick()
    assert policy.resets == 2  # every task starts with a reset of the policy's own queues
