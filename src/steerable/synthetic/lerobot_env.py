"""The synthetic tabletop as a LeRobot environment: `--env.type=steerable_tabletop`.

Imported by LeRobot's plugin discovery through the `lerobot_env_steerable` distribution (`plugins/`
in the repository), never by steerable itself: it imports lerobot at the top. `SteerableTabletopEnv`
is LeRobot's config of `gym_env.TabletopGymEnv` (the observation and action features LeRobot maps
to `observation.images.<camera>`, `observation.state`, `action`); `create_envs` builds the vectorised
envs as LeRobot's default does (sync, or async in forkserver workers; autoreset in the same step),
from `gym_env.make_tabletop`, so a worker process imports the gymnasium env alone, not lerobot.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
from lerobot.configs import FeatureType, PolicyFeature
from lerobot.envs.configs import EnvConfig

from steerable.synthetic.generate import camera_key
from steerable.synthetic.gym_env import (
    ENV_TYPE,
    GYM_ID,
    GYM_TASK,
    TabletopGymEnv,
    make_tabletop,
    parse_cameras,
)
from steerable.synthetic.render import camera_sizes

__all__ = ["ENV_TYPE", "GYM_ID", "SteerableTabletopEnv", "TabletopGymEnv"]


@EnvConfig.register_subclass(ENV_TYPE)
@dataclass
class SteerableTabletopEnv(EnvConfig):
    """LeRobot's config of the tabletop (`--env.*`): cameras (comma-separated, of top and wrist) and
    their layout (equal / legacy, as `make-dataset --camera_shapes`), the task mix (`difficulty`) or
    one fixed task (`task_text`), and the episode length in steps at `fps`."""

    task: str | None = GYM_TASK  # the gymnasium env (one: Tabletop-v0); the language task is task_text
    fps: int = 15  # world steps (actions) per second
    episode_length: int = 300  # steps before an episode is cut off
    difficulty: str = "easy"  # the task mix episodes draw from: easy, realistic or hard
    cameras: str = "top,wrist"  # comma-separated cameras: top, wrist
    camera_shapes: str = "equal"  # equal (both 224x160) or legacy (the wrist 128x128)
    task_text: str | None = None  # one task for every episode (default: drawn from each seed)
    render_mode: str = "rgb_array"
    features: dict[str, PolicyFeature] = field(default_factory=dict)
    features_map: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        sizes = camera_sizes(self.camera_shapes)
        self.features = {"action": PolicyFeature(type=FeatureType.ACTION, shape=(4,)),
                         "agent_pos": PolicyFeature(type=FeatureType.STATE, shape=(4,))}
        self.features_map = {"action": "action", "agent_pos": "observation.state"}
        for name in parse_cameras(self.cameras):
            width, height = sizes[name]
            self.features[f"pixels/{name}"] = PolicyFeature(type=FeatureType.VISUAL, shape=(height, width, 3))
            self.features_map[f"pixels/{name}"] = camera_key(name)

    @property
    def gym_kwargs(self) -> dict[str, Any]:
        return {"cameras": self.cameras, "camera_shapes": self.camera_shapes, "difficulty": self.difficulty,
                "task_text": self.task_text, "fps": self.fps, "render_mode": self.render_mode,
                "max_episode_steps": self.episode_length}

    def create_envs(self, n_envs: int,
                    use_async_envs: bool = False) -> dict[str, dict[int, gym.vector.VectorEnv]]:
        """{"steerable_tabletop": {0: a vector env of `n_envs`}}."""
        make = functools.partial(make_tabletop, **self.gym_kwargs)
        same_step = gym.vector.AutoresetMode.SAME_STEP
        vector: Any
        if use_async_envs and n_envs > 1:
            vector = gym.vector.AsyncVectorEnv([make] * n_envs, autoreset_mode=same_step, context="forkserver")
        else:
            vector = gym.vector.SyncVectorEnv([make] * n_envs, autoreset_mode=same_step)
        return {self.type: {0: vector}}
