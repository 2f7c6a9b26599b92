"""A LeRobot gym simulator as a steerable environment: `steerable run --env lerobot --env.type=TYPE`.

The `--env.*` flags are LeRobot's own (`--env.type=pusht --env.task=PushT-v0 --env.episode_length=200`),
parsed into its `EnvConfig` registry (its envs and installed `lerobot_env_*` plugins:
`steerable.runtime.lerobot.env_flags`), and the simulator is what LeRobot's `make_env` builds from it
(PushT, ALOHA, MetaWorld, LIBERO... whichever the user installed); a suite of several tasks is
spread over the seeds (episode seed s runs task s mod n).

Observations are named as LeRobot's evaluation names them for a policy: `agent_pos` is
`observation.state`, `pixels` is `observation.image` (a dict of cameras: `observation.images.<name>`);
an `environment_state` (or any other array) rides along in `Observation.privileged` under its
LeRobot key. The task is the env's own text (`task_description`, else its `task`, else the config's
task name), success is the env's `is_success` (latched when the episode ends), and once the env's
episode is over (terminated or truncated) it takes no more actions: `episode_over()` tells the
evaluation loop to stop there.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Mapping
from typing import Any

import numpy as np

from steerable.control import ActionChunk, EpisodeSpec, LowLevelController, Observation
from steerable.errors import CommandError, ConfigError, MissingExtraError
from steerable.runtime.lerobot.env_flags import choice_config, register_lerobot_choices

__all__ = ["LeRobotGymEnv", "gym_environment"]

logger = logging.getLogger(__name__)
_WARNED: set[str] = set()


def gym_environment(*, fps: int = 30, **lerobot_flags: Any) -> LeRobotGymEnv:
    """The registry's `lerobot` entry: the LeRobot env that the `--env.*` options describe."""
    register_lerobot_choices("env")  # first: without lerobot installed, the one line that says which extra
    from lerobot.envs.configs import EnvConfig

    return LeRobotGymEnv(choice_config(EnvConfig, "env", lerobot_flags), run_fps=fps)


def _first(value: Any) -> Any:
    """Sub-env 0's entry of a vector env's batched value."""
    return value[0] if isinstance(value, (list, tuple, np.ndarray)) and len(value) else value


def _sub_env(obs: Any) -> Any:
    """Sub-env 0's observation out of a vector env's batched one (dicts of arrays, nested)."""
    if isinstance(obs, Mapping):
        return {key: _sub_env(value) for key, value in obs.items()}
    return obs[0] if isinstance(obs, np.ndarray) and obs.ndim else obs


def _success(info: Mapping[str, Any]) -> bool:
    """`is_success` of sub-env 0, from a step's info or, when its episode ended, its final info."""
    final = info.get("final_info")
    if isinstance(final, Mapping) and "is_success" in final:
        return bool(_first(final["is_success"]))
    if isinstance(final, (list, tuple, np.ndarray)) and len(final) and isinstance(final[0], Mapping):
        return bool(final[0].get("is_success", False))
    return bool(_first(info.get("is_success", False)))


class LeRobotGymEnv:
    """An `Environment` over the vector env(s) LeRobot's `make_env` builds (one sub-env each)."""

    # LeRobot's gym envs name no dimensions (agent_pos_i, action_i are ours): a policy trained on
    # their datasets (motor_0...) is matched by position, as LeRobot's own evaluation does.
    positional_features = True

    def __init__(self, config: Any, *, run_fps: int | None = None) -> None:
        try:
            from lerobot.envs.factory import make_env
        except ImportError as exc:
            raise MissingExtraError("lerobot", "lerobot") from exc
        self.config = config
        self.fps = int(config.fps)
        if run_fps is not None and run_fps != self.fps and config.type not in _WARNED:
            _WARNED.add(config.type)  # once per process (evaluation workers fork after the first)
            logger.warning("--env lerobot (%s) steps at %d fps; the control loop runs at %d Hz (--ctrl_hz %d "
                           "matches them)", config.type, self.fps, run_fps, self.fps)
        try:
            with contextlib.redirect_stdout(sys.stderr):  # LeRobot prints its progress: stdout stays ours
                suites = make_env(config, n_envs=1, use_async_envs=False)
        except ModuleNotFoundError as exc:  # the simulator's own package (gym_pusht...) is missing
            raise ConfigError(f"--env.type={config.type}: {config.package_name} is not installed (LeRobot's "
                              f"extra: pip install 'lerobot[{config.type}]')") from exc
        self.tasks = [(suite, task_id, vec) for suite, envs in suites.items() for task_id, vec in envs.items()]
        if not self.tasks:
            raise ConfigError(f"--env.type={config.type}: LeRobot's make_env built no environment")
        self.robot_type = str(config.type)
        self._vec = self.tasks[0][2]
        self._suite = self.tasks[0][0]
        space = self._vec.single_observation_space
        self._state_key = "agent_pos" if "agent_pos" in space.spaces else None
        self._cameras = self._camera_spaces(space)
        self.camera_keys = tuple(self._cameras)
        state_dim = int(np.prod(space["agent_pos"].shape)) if self._state_key else 0
        self.state_names = tuple(f"agent_pos_{i}" for i in range(state_dim))
        self.action_space = self._vec.single_action_space
        self.action_names = tuple(f"action_{i}" for i in range(int(np.prod(self.action_space.shape))))
        self._obs: Mapping[str, Any] | None = None
        self._succeeded = False
        self._over = False
        self.steps = 0
        self.closed = False

    @staticmethod
    def _camera_spaces(space: Any) -> dict[str, tuple[tuple[str, ...], tuple[int, int, int]]]:
        """{LeRobot camera key: (path in the raw observation, (H, W, 3))}."""
        pixels = space.spaces.get("pixels")
        if pixels is None:
            return {}
        if hasattr(pixels, "spaces"):
            return {f"observation.images.{name}": (("pixels", name), tuple(sub.shape))
                    for name, sub in pixels.spaces.items()}
        return {"observation.image": (("pixels",), tuple(pixels.shape))}

    def camera_shapes(self) -> dict[str, tuple[int, int, int]]:
        return {key: (int(s[0]), int(s[1]), int(s[2])) for key, (_, s) in self._cameras.items()}

    def _call(self, name: str) -> Any:
        try:
            return _first(list(self._vec.call(name)))
        except (AttributeError, NotImplementedError):
            return None

    def reset(self, seed: int, task: str | None = None) -> EpisodeSpec:
        from lerobot.envs.utils import NEW_ROLLOUT_OPTION

        self._suite, _, self._vec = self.tasks[seed % len(self.tasks)]
        obs, _ = self._vec.reset(seed=[int(seed)], options={NEW_ROLLOUT_OPTION: True})
        self._obs = _sub_env(obs)
        self._succeeded = self._over = False
        self.steps = 0
        own = self._call("task_description") or self._call("task")
        text = task or (str(own) if own else str(self.config.task or self.config.type))
        return EpisodeSpec(text, kind=str(self._suite))

    def _raw(self) -> Mapping[str, Any]:
        if self._obs is None:
            raise RuntimeError("call reset() before using the environment")
        return self._obs

    def observe(self, *, render: bool = True) -> Observation:
        raw = self._raw()
        state = (np.asarray(raw[self._state_key], dtype=np.float32).reshape(-1) if self._state_key
                 else np.zeros(0, dtype=np.float32))
        images: dict[str, np.ndarray] = {}
        if render:
            for key, (path, _) in self._cameras.items():
                value: Any = raw
                for part in path:
                    value = value[part]
                images[key] = np.asarray(value)
        extra = {f"observation.{k}": np.asarray(v) for k, v in raw.items()
                 if k not in ("pixels", self._state_key) and isinstance(v, np.ndarray)}
        return Observation(state, images, self.steps / self.fps, self.state_names, privileged=extra or None)

    def send_action(self, action: np.ndarray) -> None:
        """One step of the simulator; nothing once its episode is over."""
        if self._over or self.closed:
            return
        values = np.asarray(action, dtype=np.float32).reshape(-1)
        if values.shape[0] != len(self.action_names):
            raise CommandError(f"--env lerobot ({self.config.type}): an action of {values.shape[0]} values for "
                               f"{len(self.action_names)} action dimensions")
        obs, _, terminated, truncated, info = self._vec.step(values[None])
        self.steps += 1
        self._succeeded = self._succeeded or _success(info)
        self._obs = _sub_env(obs)
        if bool(_first(terminated)) or bool(_first(truncated)):
            self._over = True
            final = info.get("final_obs")  # the vector env reset itself: keep the episode's last frame
            if final is not None and _first(final) is not None:
                self._obs = _first(final)

    def success(self) -> bool | None:
        return self._succeeded

    def episode_over(self) -> bool:
        """The env's episode ended (terminated or truncated): it takes no more actions."""
        return self._over

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        from lerobot.envs.utils import close_envs

        close_envs({suite: {task_id: vec} for suite, task_id, vec in self.tasks})

    # -- the test double behind `--low_level scripted` ----------------------------------------------------
    def scripted_controller(self) -> LowLevelController:
        """Uniform random actions over the env's action space (a baseline, not a model)."""
        return RandomActions(self)


class RandomActions:
    """A `LowLevelController` test double: uniform random actions in the env's action space, done
    once the env's episode is over. Seeded by the episode's time, so runs repeat."""

    name = "random actions (test double)"
    wants_images = False

    def __init__(self, env: LeRobotGymEnv, chunk: int = 8) -> None:
        self.env = env
        self.chunk = chunk
        self._rng = np.random.default_rng(0)

    def reset(self) -> None:
        self._rng = np.random.default_rng(0)

    def act(self, observation: Observation, command: str) -> ActionChunk:
        if self.env.episode_over():
            return ActionChunk(np.zeros((0, len(self.env.action_names)), dtype=np.float32), done=True)
        space = self.env.action_space
        low, high = np.broadcast_to(space.low, space.shape), np.broadcast_to(space.high, space.shape)
        actions = self._rng.uniform(low, high, size=(self.chunk, *space.shape)).reshape(self.chunk, -1)
        return ActionChunk(actions.astype(np.float32))
