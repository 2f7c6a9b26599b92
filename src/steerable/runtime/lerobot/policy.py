"""A LeRobot policy as steerable's low level: `steerable run --low_level lerobot --lerobot.policy_path DIR`.

The policy is loaded as LeRobot's own deployment loads it: the installed LeRobot policy plugins
(`lerobot_policy_*` distributions) imported first, as LeRobot's scripts import them, so a plugin's
policy type is known (an unknown type is one line naming the distribution likely missing); its config
and class from LeRobot's registry (`get_policy_class`), its weights by `from_pretrained`, and its pre-
and postprocessor pipelines from the same folder (`make_pre_post_processors`, the device overridden).
Each control tick goes through LeRobot's inference path: the environment's observation becomes the frame
a LeRobot robot would give (state in the policy's order, camera frames under its keys), then
`prepare_observation_for_inference` (tensors, channels first, [0, 1], batch, device), the active command
as the `task`, the preprocessor (normalisation, tokenization of the task, device), `select_action`, and
the postprocessor (unnormalisation). The controller is called on every tick (`every_tick`) and returns
that tick's action, so the policy's own `select_action` semantics hold: its action queue and
`n_action_steps`, ACT's temporal ensembling, the observation history of `n_obs_steps`. The action is the
postprocessor's output, in the units of the dataset the policy was trained on, sent to the environment's
action of the same name (`policy_features`).

When the command changes (a new subtask, an interjection) the policy and its processors are reset:
actions queued for the old command are never executed, as the runtime discards stale chunks.
"""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from steerable.control import ActionChunk, Environment, Observation, ProvidesEnvironmentState
from steerable.errors import ConfigError, MissingExtraError
from steerable.policy.lerobot_format import LEROBOT_TYPE
from steerable.runtime.lerobot.env_flags import import_plugins
from steerable.runtime.lerobot.policy_features import (
    ENVIRONMENT_STATE,
    STATE,
    FeatureMap,
    match_features,
    resized,
    trained_names,
)

__all__ = ["LeRobotPolicyController", "load_lerobot_policy"]

_CONFIG = "config.json"
_TRAIN_CONFIG = "train_config.json"  # what LeRobot's trainer writes beside a checkpoint's config.json
_PLUGIN_PREFIX = "lerobot_policy_"  # LeRobot imports the installed distributions named so


def _lerobot() -> Any:
    try:
        import lerobot.policies
        import torch  # noqa: F401  (lerobot brings it)
    except ImportError as exc:
        raise MissingExtraError("lerobot", "lerobot") from exc
    import_plugins((_PLUGIN_PREFIX,))  # a plugin's policy type exists once its distribution is imported
    return lerobot.policies


def _features(features: Any) -> dict[str, tuple[str, tuple[int, ...]]]:
    """LeRobot `PolicyFeature`s as {key: (type name, shape)}."""
    return {key: (str(getattr(ft.type, "name", ft.type)), tuple(int(s) for s in ft.shape))
            for key, ft in (features or {}).items()}


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:300]}" if text else type(exc).__name__


class LeRobotPolicyController:
    """A `LowLevelController` over a loaded LeRobot policy and its processors (see the module docstring)."""

    every_tick = True  # select_action gives one action per tick: the loop calls act() on every tick

    def __init__(self, policy: Any, preprocessor: Any, postprocessor: Any, features: FeatureMap, *,
                 device: str = "cpu", robot_type: str = "") -> None:
        self.policy, self.preprocessor, self.postprocessor = policy, preprocessor, postprocessor
        self.features = features
        self.device = device
        self.robot_type = robot_type
        self.name = f"LeRobot {getattr(policy.config, 'type', type(policy).__name__)} policy"
        self.wants_images = bool(features.cameras)
        self._command: str | None = None

    def reset(self) -> None:
        """A new episode: the policy's queues and history, and any state of its processors, start over."""
        self.policy.reset()
        self.preprocessor.reset()
        self.postprocessor.reset()
        self._command = None

    def frame(self, observation: Observation) -> dict[str, np.ndarray]:
        """The observation as a LeRobot robot frame: `observation.state` in the policy's order, the
        simulator's object positions when it reads them, each camera's HxWx3 uint8 frame."""
        fm = self.features
        out: dict[str, np.ndarray] = {}
        if fm.state_index is not None:
            out[STATE] = np.asarray(observation.state, dtype=np.float32)[list(fm.state_index)]
        if fm.environment_state:
            if observation.environment_state is None:
                raise ConfigError(f"this policy reads {ENVIRONMENT_STATE}, which only the simulator gives "
                                  "(--env sim --observation privileged)")
            out[ENVIRONMENT_STATE] = np.asarray(observation.environment_state, dtype=np.float32)
        for key in fm.cameras:
            frame = np.asarray(observation.images[key])
            out[key] = np.ascontiguousarray(resized(frame, fm.resize[key]) if key in fm.resize else frame)
        return out

    def act(self, observation: Observation, command: str) -> ActionChunk:
        import torch
        from lerobot.policies.utils import prepare_observation_for_inference

        if command != self._command:
            if self._command is not None:
                self.reset()
            self._command = command
        with torch.inference_mode():
            batch = prepare_observation_for_inference(self.frame(observation), torch.device(self.device),
                                                      command, self.robot_type)
            batch = self.preprocessor(batch)
            action = self.postprocessor(self.policy.select_action(batch))
        row = action.detach().to("cpu").float().numpy().reshape(-1)
        return ActionChunk(row[list(self.features.action_index)][None].astype(np.float32))


def _source(policy_path: str) -> tuple[str, Path | None]:
    """(what LeRobot loads from, the local folder or None for a Hub id)."""
    local = Path(policy_path).expanduser()
    if local.exists():
        if not (local / "config.json").is_file():
            raise ConfigError(f"--lerobot.policy_path {policy_path}: no config.json there; give the folder LeRobot's "
                              "save_pretrained wrote (e.g. outputs/train/.../checkpoints/last/pretrained_model)")
        return str(local), local
    if policy_path.count("/") != 1 or policy_path.startswith(("/", ".", "~")):
        raise ConfigError(f"--lerobot.policy_path {policy_path}: no such folder (nor a Hub id like user/policy)")
    return policy_path, None


def _checkpoint_file(source: str, local: Path | None, name: str) -> Path | None:
    """The checkpoint's file `name` (downloaded for a Hub id), or None where it has none."""
    if local is not None:
        return local / name
    try:
        from huggingface_hub import hf_hub_download

        return Path(hf_hub_download(source, name))
    except Exception:  # noqa: BLE001  (none, or offline: the caller does without it)
        return None


def _check_type(policy_path: str, config: Path | None) -> None:
    """A policy type LeRobot's registry lacks is one line naming the type and the distribution that
    likely provides it (LeRobot's own error lists its whole registry)."""
    from lerobot.configs.policies import PreTrainedConfig

    try:
        kind = json.loads(config.read_text(encoding="utf-8")).get("type") if config is not None else None
    except (OSError, ValueError, AttributeError):
        return  # LeRobot's loader says what is wrong with the file
    if not isinstance(kind, str) or kind in PreTrainedConfig.get_known_choices():
        return
    if kind == LEROBOT_TYPE:
        raise ConfigError(f"--lerobot.policy_path {policy_path}: a steerable checkpoint: run it with --low_level "
                          "policy --policy.path, or install steerable's LeRobot plugin "
                          "(pip install -e plugins/lerobot_policy_steerable)")
    raise ConfigError(f"--lerobot.policy_path {policy_path}: LeRobot knows no policy type {kind!r}: install the "
                      f"LeRobot plugin that provides it (likely pip install {_PLUGIN_PREFIX}{kind})")


def load_lerobot_policy(
    policy_path: str | None, env: Environment, *, device: str = "cpu", dataset: str | None = None,
    observation: str = "standard",
) -> LeRobotPolicyController:
    """The LeRobot policy at `policy_path` (a folder `save_pretrained` wrote, or a Hub id) on `env`, its
    features checked against the environment's (ConfigError, one line, before anything moves)."""
    if not policy_path:
        raise ConfigError("--low_level lerobot needs --lerobot.policy_path DIR (a folder LeRobot's save_pretrained "
                          "wrote, or a Hub id)")
    policies = _lerobot()
    from lerobot.configs.policies import PreTrainedConfig

    source, local = _source(policy_path)
    _check_type(policy_path, _checkpoint_file(source, local, _CONFIG))
    try:
        cfg = PreTrainedConfig.from_pretrained(source)
    except Exception as exc:  # noqa: BLE001  (LeRobot's and the Hub's errors: one line)
        hint = " (a steerable checkpoint runs with --low_level policy --policy.path)" \
            if local is not None and isinstance(exc, ValueError) else ""
        raise ConfigError(f"--lerobot.policy_path {policy_path}: not a LeRobot policy LeRobot can load: "
                          f"{_one_line(exc)}{hint}") from exc
    if getattr(cfg, "use_peft", False):
        raise ConfigError(f"--lerobot.policy_path {policy_path}: a PEFT adapter; merge it into the policy first")
    names = trained_names(dataset=dataset, train_config=_checkpoint_file(source, local, _TRAIN_CONFIG),
                          config_action_names=getattr(cfg, "action_feature_names", None))
    fm = match_features(_features(cfg.input_features), _features(cfg.output_features), env, names,
                        observation=observation)
    if fm.environment_state:
        if not isinstance(env, ProvidesEnvironmentState):
            raise ConfigError(f"the policy reads {ENVIRONMENT_STATE}, which this environment ({type(env).__name__}) "
                              "does not give: run it in the simulator (--env sim --observation privileged)")
        dim = cfg.input_features[ENVIRONMENT_STATE].shape[0]
        if dim != len(env.environment_state_names):
            raise ConfigError(f"the policy reads a {dim}-dimensional {ENVIRONMENT_STATE}; the environment's has "
                              f"{len(env.environment_state_names)}")
    cfg.pretrained_path = source
    cfg.device = device
    try:  # what LeRobot prints while loading goes to stderr: stdout stays the run's (or one JSON object)
        with contextlib.redirect_stdout(sys.stderr):
            policy = policies.get_policy_class(cfg.type).from_pretrained(source, config=cfg)
            policy.to(device)
            policy.eval()
            preprocessor, postprocessor = policies.make_pre_post_processors(
                cfg, pretrained_path=source, preprocessor_overrides={"device_processor": {"device": device}})
    except Exception as exc:  # noqa: BLE001
        raise ConfigError(f"--lerobot.policy_path {policy_path}: LeRobot could not load it: {_one_line(exc)}") from exc
    controller = LeRobotPolicyController(policy, preprocessor, postprocessor, fm, device=device,
                                         robot_type=env.robot_type)
    controller.reset()
    return controller
