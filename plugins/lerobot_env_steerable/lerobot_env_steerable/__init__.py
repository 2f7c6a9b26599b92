"""LeRobot's entry to steerable's synthetic tabletop: importing it registers `--env.type=steerable_tabletop`
and the gymnasium env it makes (the implementation is `steerable.synthetic.lerobot_env`)."""

from steerable.synthetic.lerobot_env import GYM_ID, SteerableTabletopEnv, TabletopGymEnv

__all__ = ["GYM_ID", "SteerableTabletopEnv", "TabletopGymEnv"]
