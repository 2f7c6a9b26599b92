"""A LeRobot robot plugin for the tests: an SO-101-like arm on a fake motors bus, in degrees.

LeRobot finds it as it finds any third-party robot: a distribution named `lerobot_robot_*` is
imported by `register_third_party_plugins()`, and importing it registers its configs in
`RobotConfig`'s choices (`mock_arm`, `mock_bare_arm`). The tests make it an installed distribution
by putting this folder beside a minimal `lerobot_robot_mockarm-0.0.1.dist-info` on PYTHONPATH.
"""

from .config_mock_arm import MockArmConfig, MockBareArmConfig
from .mock_arm import MockArm, MockBareArm

__all__ = ["MockArm", "MockArmConfig", "MockBareArm", "MockBareArmConfig"]
