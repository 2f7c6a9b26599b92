"""The mock arms: SO-101's six motors on a `FakeMotorsBus`, an optional synthetic camera, a call log."""

from __future__ import annotations

import json
import os
from functools import cached_property
from typing import Any

import numpy as np
from lerobot.motors import Motor, MotorNormMode
from lerobot.robots import Robot
from lerobot.robots.utils import ensure_safe_goal_position

from .config_mock_arm import MockArmConfig, MockBareArmConfig
from .fake_bus import FakeMotorsBus

MOTORS = ("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper")


class MockArm(Robot):
    config_class = MockArmConfig
    name = "mock_arm"

    def __init__(self, config: MockArmConfig | MockBareArmConfig) -> None:
        super().__init__(config)
        self.config = config
        self.bus = FakeMotorsBus(config.port, {
            name: Motor(i + 1, "sts3215", MotorNormMode.RANGE_0_100 if name == "gripper" else MotorNormMode.DEGREES)
            for i, name in enumerate(MOTORS)}, speed=config.speed)
        for name in MOTORS:
            self.bus.set_units(name, 50.0 if name == "gripper" else config.start)
        self.observations = 0

    def _log(self, call: str, **data: Any) -> None:
        if self.config.log:
            with open(self.config.log, "a", encoding="utf-8") as f:
                f.write(json.dumps({"call": call, "pid": os.getpid(), **data}) + "\n")

    @property
    def _camera(self) -> tuple[int, int, int] | None:
        c = self.config
        return (c.camera_height, c.camera_width, 3) if c.camera_width and c.camera_height else None

    @cached_property
    def observation_features(self) -> dict[str, Any]:
        features: dict[str, Any] = {f"{m}.pos": float for m in MOTORS}
        if self._camera is not None:
            features["front"] = self._camera
        return features

    @cached_property
    def action_features(self) -> dict[str, type]:
        return {f"{m}.pos": float for m in MOTORS}

    @property
    def is_connected(self) -> bool:
        return self.bus.is_connected

    @property
    def is_calibrated(self) -> bool:
        return True

    def connect(self, calibrate: bool = True) -> None:
        self.bus.connect()
        self.configure()
        self._log("connect")

    def calibrate(self) -> None:
        pass

    def configure(self) -> None:
        self.bus.enable_torque()

    def get_observation(self) -> dict[str, Any]:
        self.observations += 1
        glitch = self.config.glitch if self.config.glitch_after and self.observations >= self.config.glitch_after \
            else ""
        obs: dict[str, Any] = {f"{m}.pos": v for m, v in self.bus.sync_read("Present_Position").items()}
        if glitch == "nan":
            obs = dict.fromkeys(obs, float("nan"))
        if self._camera is not None:
            h, w, _ = self._camera
            frame = np.zeros((h, w, 4 if glitch == "channels" else 3), dtype=np.uint8)
            frame[..., 0] = np.linspace(0, 255, w, dtype=np.uint8)[None]
            frame[..., 1] = int(obs["shoulder_pan.pos"] if glitch != "nan" else 0) % 256
            obs["front"] = frame
        return obs

    def send_action(self, action: dict[str, float]) -> dict[str, float]:
        goal = {key.removesuffix(".pos"): float(v) for key, v in action.items()}
        bound = getattr(self.config, "max_relative_target", None)
        if bound is not None:  # LeRobot's own safety clip, against the present position (as SO-101 does)
            present = self.bus.sync_read("Present_Position")
            goal = ensure_safe_goal_position({k: (g, present[k]) for k, g in goal.items()}, bound)
        self.bus.sync_write("Goal_Position", goal)
        sent = {f"{m}.pos": v for m, v in goal.items()}
        self._log("send_action", action=dict(action), sent=sent)
        return sent

    def disconnect(self) -> None:
        self.bus.disconnect(disable_torque=True)
        self._log("disconnect")


class MockBareArm(MockArm):
    config_class = MockBareArmConfig
    name = "mock_bare_arm"
