"""A LeRobot robot as a steerable environment (being rebuilt on LeRobot's robot registry: #19)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from steerable.control import EpisodeSpec, Observation

__all__ = ["LeRobotRobotEnv"]


class LeRobotRobotEnv:
    """An `Environment` over a LeRobot-style robot (`observation_features` / `action_features` dicts).

    State = the float observation features in their declared order; images = the (H, W, 3) ones;
    an action row is sent as `{name: value}` over `action_features`, in order. A robot has no scene
    to reset and cannot judge success: `reset` keeps the task as given, `success` is None.
    """

    def __init__(self, robot: Any, *, fps: int = 30) -> None:
        self.robot = robot
        self.fps = fps
        if not getattr(robot, "is_connected", False):
            robot.connect()
        features: Mapping[str, Any] = robot.observation_features
        self.state_names = tuple(k for k, v in features.items() if v is float)
        self.cameras = tuple(k for k, v in features.items() if isinstance(v, tuple) and len(v) == 3)
        self.camera_keys = tuple(f"observation.images.{k}" for k in self.cameras)
        self.action_names: tuple[str, ...] = tuple(robot.action_features)
        self.action_dim = len(self.action_names)
        self.robot_type = str(getattr(robot, "name", None) or type(robot).__name__)
        self._shapes = {f"observation.images.{k}": (int(features[k][0]), int(features[k][1]), int(features[k][2]))
                        for k in self.cameras}
        self.steps = 0

    def camera_shapes(self) -> dict[str, tuple[int, int, int]]:
        return dict(self._shapes)  # (H, W, 3) as the robot declares them

    def reset(self, seed: int, task: str | None = None) -> EpisodeSpec:
        self.steps = 0
        return EpisodeSpec(task or "")

    def success(self) -> bool | None:
        return None

    def observe(self, *, render: bool = True) -> Observation:
        raw = self.robot.get_observation()
        state = np.array([float(raw[k]) for k in self.state_names], dtype=np.float32)
        images = {f"observation.images.{k}": np.asarray(raw[k]) for k in self.cameras} if render else {}
        return Observation(state, images, self.steps / self.fps, self.state_names)

    def send_action(self, action: np.ndarray) -> None:
        values = np.asarray(action, dtype=np.float64).reshape(-1)
        self.robot.send_action({name: float(v) for name, v in zip(self.action_names, values, strict=True)})
        self.steps += 1

    def close(self) -> None:
        if getattr(self.robot, "is_connected", True):
            self.robot.disconnect()
