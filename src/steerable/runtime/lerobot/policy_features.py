"""Which features of an environment a LeRobot policy reads and writes, matched by name before it runs.

A LeRobot checkpoint's `config.json` gives each input and output feature a type and a shape, not
the names of its dimensions: those are in the dataset the policy was trained on (`meta/info.json`,
`names` of `observation.state` and `action`). They are looked up in the dataset `--lerobot.dataset`
names, else in the dataset of the checkpoint's `train_config.json` (LeRobot's trainer writes it
beside the weights: its `root`, or its `repo_id` under LeRobot's local dataset home), else in the
config's own `action_feature_names` (pi0-family configs keep them). A relative `root` is relative to
the folder training ran in, which the config does not record: it is found again from the
checkpoint's own path, which ends with the config's relative `output_dir` (then
`checkpoints/<step>/pretrained_model`), then tried against each folder above the checkpoint, then
against the present folder. A `root` found nowhere, with no other source of names, is refused in
one line naming `--lerobot.dataset`: the checkpoint says which dataset named its dimensions, and
guessing them could send an action to the wrong joint. With names, the policy's state
is gathered from the environment's state by name and each action dimension goes to the
environment's action of the same name; a name one side lacks is refused. Without names, only the
dimensions can be checked, and the environment's order is assumed (as LeRobot's own rollout does),
with a warning. An environment whose vectors have no names of their own, only the order of its gym
spaces (a LeRobot gym simulator, as LeRobot's own evaluation feeds it), says so with
`positional_features = True`: there the dimensions are matched by position, as LeRobot does. Camera
frames must come under the policy's keys, at the shape it was trained on.

This module reads JSON only; `policy.py` hands it the features of the loaded config.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from steerable.control import Environment
from steerable.errors import ConfigError

__all__ = ["ENVIRONMENT_STATE", "STATE", "FeatureMap", "Names", "match_features", "resized", "trained_names"]

logger = logging.getLogger(__name__)

STATE = "observation.state"
ENVIRONMENT_STATE = "observation.environment_state"
ACTION = "action"
# LeRobot's synthetic placeholder cameras (SmolVLA's `empty_cameras`): the policy fills them itself.
_EMPTY_CAMERA = "observation.images.empty_camera_"


@dataclass(frozen=True)
class Names:
    """The dimension names of a policy's vectors (`observation.state`, `action`, ...) and where they came from."""

    by_feature: Mapping[str, tuple[str, ...]]
    source: str


@dataclass(frozen=True)
class FeatureMap:
    """How one environment's observation becomes the policy's frame, and its output the environment's action.

    `state_index[i]`: the environment state dimension that is the policy's state dimension i (None:
    the policy reads no `observation.state`); `action_index[j]`: the policy output dimension sent as
    the environment's action j; `cameras`: the camera keys the policy reads; `environment_state`:
    whether it reads the simulator's object positions (`--observation privileged`); `named`: whether
    the vectors were matched by name (else by position); `resize`: camera -> the (height, width) the policy
    was trained on, where the environment gives the same picture at another size (Meta-World renders
    480x480 and its recordings are smaller).
    """

    state_index: tuple[int, ...] | None
    action_index: tuple[int, ...]
    cameras: tuple[str, ...]
    environment_state: bool
    named: bool
    resize: dict[str, tuple[int, int]] = field(default_factory=dict)


def resized(frame: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """An HxWx3 uint8 frame at (height, width) `size`, area-weighted (PIL's bilinear filter widens with the
    scale, so a downscale averages every pixel it covers, as a camera at that size would see it)."""
    from PIL import Image

    height, width = size
    image = Image.fromarray(np.asarray(frame, dtype=np.uint8))
    return np.asarray(image.resize((width, height), Image.Resampling.BILINEAR))


def _names_of(feature: Mapping[str, Any]) -> tuple[str, ...] | None:
    """A dataset feature's dimension names: a list, or (older datasets) a dict holding one list."""
    names = feature.get("names")
    if isinstance(names, Mapping) and len(names) == 1:
        names = next(iter(names.values()))
    if isinstance(names, Sequence) and not isinstance(names, str) and all(isinstance(n, str) for n in names):
        return tuple(names)
    return None


def _info_names(info_path: Path) -> Names | None:
    try:
        info = json.loads(info_path.read_text())
    except (OSError, ValueError):
        return None
    features = info.get("features") if isinstance(info, Mapping) else None
    if not isinstance(features, Mapping):
        return None
    found = {key: names for key, ft in features.items() if isinstance(ft, Mapping) and (names := _names_of(ft))}
    return Names(found, str(info_path)) if ACTION in found else None


def _lerobot_home() -> Path:
    """Where LeRobot keeps local datasets by repo id (its `HF_LEROBOT_HOME`)."""
    if home := os.environ.get("HF_LEROBOT_HOME"):
        return Path(home).expanduser()
    hf_home = Path(os.environ.get("HF_HOME", "~/.cache/huggingface")).expanduser()
    return hf_home / "lerobot"


def _training_folders(checkpoint: Path, output_dir: Any) -> list[Path]:
    """The folder training ran in, as far as the checkpoint's path tells: the part before the config's
    relative `output_dir` (none when it is absolute or not on the path), then every folder above the
    checkpoint, nearest first; both as given and with links resolved."""
    out_parts = Path(output_dir).parts if isinstance(output_dir, str) and output_dir else ()
    if out_parts and Path(output_dir).is_absolute():
        out_parts = ()
    ran_in: list[Path] = []
    above: list[Path] = []
    for path in dict.fromkeys((checkpoint.absolute(), checkpoint.resolve())):
        for folder in (path, *path.parents):
            if out_parts and len(folder.parts) > len(out_parts) and folder.parts[-len(out_parts):] == out_parts:
                ran_in.append(Path(*folder.parts[: -len(out_parts)]))
            above.append(folder)
    return list(dict.fromkeys([*ran_in, *above]))


def _train_config_dataset(train_config: Path) -> tuple[list[Path], str | None]:
    """(the dataset folders a LeRobot `train_config.json` points at: its root, resolved as the module
    docstring says, and its repo id locally; the root as written, None when it names none)."""
    try:
        config = json.loads(train_config.read_text())
        dataset = config.get("dataset") or {}
        root = dataset.get("root")
    except (OSError, ValueError, AttributeError):
        return [], None
    out = []
    if not isinstance(root, str) or not root:
        root = None
    elif Path(root).expanduser().is_absolute():
        out.append(Path(root).expanduser())
    else:
        out += [folder / root for folder in _training_folders(train_config.parent, config.get("output_dir"))]
        out.append(Path.cwd() / root)
    if isinstance(repo_id := dataset.get("repo_id"), str) and repo_id and not repo_id.startswith("["):
        out.append(_lerobot_home() / repo_id)
    return out, root


def trained_names(
    *, dataset: str | None, train_config: Path | None, config_action_names: Sequence[str] | None
) -> Names | None:
    """The dimension names the policy was trained with (see the module docstring), or None."""
    if dataset is not None:
        info = Path(dataset).expanduser() / "meta" / "info.json"
        names = _info_names(info)
        if names is None:
            raise ConfigError(f"--lerobot.dataset {dataset}: {info} is missing or names no action features; "
                              "point it at the LeRobot dataset the policy was trained on")
        return names
    lost_root = None
    if train_config is not None and train_config.is_file():
        roots, lost_root = _train_config_dataset(train_config)
        for root in roots:
            if (names := _info_names(root / "meta" / "info.json")) is not None:
                return names
    if config_action_names:
        return Names({ACTION: tuple(config_action_names)}, "the policy config's action_feature_names")
    if lost_root is not None:
        raise ConfigError(f"the policy was trained on the dataset at {lost_root} ({train_config}), which is not "
                          "found from here nor beside the checkpoint: pass --lerobot.dataset DIR (that dataset, "
                          "whose meta/info.json names the state and action dimensions)")
    return None


def _gather(policy_names: tuple[str, ...], env_names: tuple[str, ...], what: str, env_what: str,
            hint: str) -> tuple[int, ...]:
    """For each of the policy's names, its index among the environment's (each name once on both sides)."""
    missing = [n for n in policy_names if n not in env_names]
    if missing or len(set(policy_names)) != len(policy_names):
        raise ConfigError(
            f"the policy's {what} ({', '.join(policy_names)}) do not match this environment's {env_what} "
            f"({', '.join(env_names)}): missing {', '.join(missing) or 'none'}; {hint}")
    return tuple(env_names.index(n) for n in policy_names)


def _check_dims(names: tuple[str, ...] | None, dim: int, key: str) -> tuple[str, ...] | None:
    if names is not None and len(names) != dim:
        raise ConfigError(f"the policy's {key} has {dim} dimensions but its dataset names {len(names)} "
                          f"({', '.join(names)}): is --lerobot.dataset the dataset it was trained on?")
    return names


def match_features(
    inputs: Mapping[str, tuple[str, tuple[int, ...]]],
    outputs: Mapping[str, tuple[str, tuple[int, ...]]],
    env: Environment,
    names: Names | None,
    *,
    observation: str = "standard",
) -> FeatureMap:
    """The `FeatureMap` of a policy with `inputs` / `outputs` ({key: (type, shape)}, LeRobot's feature
    types as names: STATE, VISUAL, ENV, ACTION) on `env`; ConfigError on any mismatch, before it acts."""
    hint = ("the policy was trained on another robot or dataset; check --lerobot.dataset, or run it where its "
            "features exist")
    positional = bool(getattr(env, "positional_features", False))
    by = dict(names.by_feature) if names is not None and not positional else {}
    if ACTION not in outputs:
        raise ConfigError(f"the policy has no {ACTION!r} output (its outputs: {', '.join(outputs) or 'none'})")
    action_dim = int(outputs[ACTION][1][0])
    action_names = _check_dims(by.get(ACTION), action_dim, ACTION)
    env_actions = tuple(env.action_names)
    if action_names is not None:
        if len(action_names) != len(env_actions) or set(action_names) != set(env_actions):
            extra = [n for n in action_names if n not in env_actions]
            raise ConfigError(
                f"the policy's actions ({', '.join(action_names)}) do not match this environment's "
                f"({', '.join(env_actions)}): it would send {', '.join(extra) or 'none'} that the environment "
                f"lacks; {hint}")
        action_index = tuple(action_names.index(n) for n in env_actions)
    elif action_dim != len(env_actions):
        raise ConfigError(f"the policy outputs {action_dim} action dimensions but this environment takes "
                          f"{len(env_actions)} ({', '.join(env_actions)}); {hint}")
    else:
        action_index = tuple(range(action_dim))

    state_index: tuple[int, ...] | None = None
    cameras: list[str] = []
    resize: dict[str, tuple[int, int]] = {}
    environment_state = False
    shapes = env.camera_shapes()
    for key, (kind, shape) in inputs.items():
        if kind == "VISUAL":
            if key.startswith(_EMPTY_CAMERA):
                continue
            if key not in shapes:
                raise ConfigError(f"the policy reads camera {key}, which this environment does not have (its "
                                  f"cameras: {', '.join(env.camera_keys) or 'none'}); {hint}")
            height, width = shapes[key][:2]
            trained = (int(shape[-2]), int(shape[-1]))
            if trained != (height, width):
                if trained[0] * width != trained[1] * height:  # another picture, not another size of it
                    raise ConfigError(f"the policy was trained on {shape[-2]}x{shape[-1]} frames of {key}; this "
                                      f"environment gives {height}x{width} (the simulator: try --camera_shapes)")
                resize[key] = trained
                logger.info("%s: the environment's %dx%d frames are resized to the %dx%d the policy was trained on",
                            key, height, width, *trained)
            cameras.append(key)
        elif key == STATE:
            dim = int(shape[0])
            state_names = _check_dims(by.get(STATE), dim, STATE)
            env_state = tuple(env.state_names)
            if state_names is not None:
                state_index = _gather(state_names, env_state, "state names", "state", hint)
            elif dim != len(env_state):
                raise ConfigError(f"the policy reads a {dim}-dimensional {STATE}; this environment's has "
                                  f"{len(env_state)} ({', '.join(env_state)}); {hint}")
            else:
                state_index = tuple(range(dim))
        elif key == ENVIRONMENT_STATE:
            if observation != "privileged":
                raise ConfigError(f"this policy reads {key} (object positions): run it in the simulator with "
                                  "--observation privileged")
            environment_state = True
        else:
            raise ConfigError(f"the policy reads {key} ({kind}), which steerable cannot give it (it gives "
                              f"{STATE}, {ENVIRONMENT_STATE} in the simulator, and camera frames)")
    if names is None and not positional:
        logger.warning("the policy's checkpoint does not name its state and action dimensions: assuming this "
                       "environment's order (%s); name them with --lerobot.dataset DATASET", ", ".join(env_actions))
    return FeatureMap(state_index, action_index, tuple(cameras), environment_state, bool(by), resize)
