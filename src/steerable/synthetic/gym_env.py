"""The synthetic tabletop as a gymnasium env (`TabletopGymEnv`, registered as `GYM_ID` on import).

`SimEnv` behind gymnasium's API, laid out as LeRobot's `preprocess_observation` reads an env:
`pixels` (camera name -> uint8 H x W x 3) becomes `observation.images.<camera>`, `agent_pos` (the
gripper pose `ee.x, ee.y, ee.z, gripper.closure`) becomes `observation.state`, the names and shapes of
a synthetic dataset, so a policy trained on one runs here unchanged. Each reset draws a scene from
its seed and, unless `task_text` fixes one, a task at `difficulty` (as `steerable make-dataset
synthetic --difficulty`); `task_description` is its text, the language task LeRobot hands the
policy. An episode ends when every step of the task holds (`info["is_success"]`, reward 1), or is
truncated after `max_episode_steps`. Imports gymnasium (LeRobot brings it), not lerobot: vector-env
workers import this module alone (`lerobot_env` is LeRobot's config around it).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from steerable.errors import ConfigError
from steerable.synthetic.env import SimEnv
from steerable.synthetic.generate import camera_key
from steerable.synthetic.render import CAMERAS
from steerable.synthetic.world import TABLE_DEPTH, TABLE_WIDTH

__all__ = ["GYM_ID", "TabletopGymEnv", "make_tabletop", "parse_cameras"]

ENV_TYPE = "steerable_tabletop"
GYM_TASK = "Tabletop-v0"
# The id LeRobot's `EnvConfig` composes for the env type and task: gym_<type>/<task>.
GYM_ID = f"gym_{ENV_TYPE}/{GYM_TASK}"
# What `SimEnv.send_action` accepts before it clips: metres in the table frame, closure 0..1.
_ACTION_LOW = np.array([-0.05, -0.05, 0.0, 0.0], dtype=np.float32)
_ACTION_HIGH = np.array([TABLE_WIDTH + 0.05, TABLE_DEPTH + 0.05, 0.25, 1.0], dtype=np.float32)


def parse_cameras(text: str) -> tuple[str, ...]:
    """The camera names of a comma-separated `--env.cameras` value."""
    names = tuple(c.strip() for c in text.split(",") if c.strip())
    unknown = [c for c in names if c not in CAMERAS]
    if unknown or not names:
        raise ConfigError(f"--env.cameras {text!r}: give a comma-separated subset of {', '.join(CAMERAS)}")
    return names


class TabletopGymEnv(gym.Env[dict[str, Any], np.ndarray]):
    """`SimEnv` as a gymnasium env (see the module docstring)."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 15}

    def __init__(self, cameras: str = "top,wrist", camera_shapes: str = "equal", difficulty: str = "easy",
                 task_text: str | None = None, fps: int = 15, render_mode: str = "rgb_array") -> None:
        self.sim = SimEnv(fps=fps, cameras=parse_cameras(cameras), camera_shapes=camera_shapes,
                          difficulty=difficulty)
        self.task_text = task_text or None
        self.render_mode = render_mode
        self.metadata = {**self.metadata, "render_fps": fps}
        shapes = self.sim.camera_shapes()
        self.observation_space = spaces.Dict({
            "pixels": spaces.Dict({c: spaces.Box(0, 255, shapes[camera_key(c)], np.uint8)
                                   for c in self.sim.cameras}),
            "agent_pos": spaces.Box(-np.inf, np.inf, (len(self.sim.state_names),), np.float32),
        })
        self.action_space = spaces.Box(_ACTION_LOW, _ACTION_HIGH, dtype=np.float32)
        self._task = ""
        self._frames: dict[str, np.ndarray] = {}

    @property
    def task(self) -> str:
        return self._task

    @property
    def task_description(self) -> str:
        return self._task

    def _observe(self) -> dict[str, Any]:
        seen = self.sim.observe()
        self._frames = {name: seen.images[camera_key(name)] for name in self.sim.cameras}
        return {"pixels": dict(self._frames), "agent_pos": np.asarray(seen.state, dtype=np.float32)}

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[dict[str, Any], dict[str, Any]]:
        super().reset(seed=seed)
        scene = int(seed) if seed is not None else int(self.np_random.integers(2**31 - 1))
        self._task = self.sim.reset(scene, self.task_text).task
        return self._observe(), {"is_success": False}

    def step(self, action: np.ndarray) -> tuple[dict[str, Any], float, bool, bool, dict[str, Any]]:
        self.sim.send_action(np.asarray(action, dtype=np.float64))
        done = bool(self.sim.success())
        return self._observe(), float(done), done, False, {"is_success": done}

    def render(self) -> np.ndarray:
        """The first camera's last frame."""
        return self._frames[self.sim.cameras[0]]


def make_tabletop(max_episode_steps: int, **kwargs: Any) -> gym.Env[dict[str, Any], np.ndarray]:
    """`gym.make(GYM_ID, ...)` with its time limit: a module-level function, so a vector env's worker
    process unpickles it by importing this module alone."""
    return gym.make(GYM_ID, max_episode_steps=max_episode_steps, disable_env_checker=True, **kwargs)


if GYM_ID not in gym.registry:
    gym.register(id=GYM_ID, entry_point=f"{__name__}:TabletopGymEnv")

