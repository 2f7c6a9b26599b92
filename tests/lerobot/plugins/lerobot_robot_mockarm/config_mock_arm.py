"""The configs of the mock arms, registered in LeRobot's robot choices when the plugin is imported."""

from __future__ import annotations

from dataclasses import dataclass

from lerobot.robots import RobotConfig


@dataclass(kw_only=True)
class _MockArmFields:
    port: str = "/dev/mock_arm"
    log: str | None = None  # a JSON-lines file: one line per call (connect, send_action, disconnect...)
    camera_width: int = 0  # 0: no camera
    camera_height: int = 0
    start: float = 0.0  # where the body joints start, in degrees (the gripper at 50 of 0-100)
    speed: float = 400.0  # the most a motor moves between two readings, in encoder ticks
    glitch: str = ""  # "channels": frames get a 4th channel; "nan": the state reads NaN...
    glitch_after: int = 0  # ...from this observation on (0: never)


@RobotConfig.register_subclass("mock_arm")
@dataclass(kw_only=True)
class MockArmConfig(RobotConfig, _MockArmFields):
    # As on an SO-101: when set, the robot itself clips each goal to this far from the present position.
    max_relative_target: float | dict[str, float] | None = None


@RobotConfig.register_subclass("mock_bare_arm")
@dataclass(kw_only=True)
class MockBareArmConfig(RobotConfig, _MockArmFields):
    """The same arm without a `max_relative_target` field: steerable's bound is the only one."""
