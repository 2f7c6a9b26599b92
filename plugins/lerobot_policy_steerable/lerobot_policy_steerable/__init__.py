"""LeRobot's entry to steerable's hierarchical policy: importing it registers
`--policy.type=steerable_hierarchical` (the implementation is `steerable.policy.lerobot_plugin`)."""

from steerable.policy.lerobot_plugin import (
    SteerableHierarchicalConfig,
    SteerableHierarchicalPolicy,
    make_steerable_hierarchical_pre_post_processors,
)

__all__ = [
    "SteerableHierarchicalConfig",
    "SteerableHierarchicalPolicy",
    "make_steerable_hierarchical_pre_post_processors",
]
