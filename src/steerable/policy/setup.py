"""Build what a training run needs: a fresh policy from a dataset, or the state of a run to resume."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from steerable.dataset import LeRobotDataset
from steerable.dataset.frames import ACTION_KEYS, STATE_KEYS, float_vectors, pick_feature
from steerable.dataset.objects import OBJECTS_PATH, read_object_schema
from steerable.errors import ConfigError
from steerable.policy.backbone import backbone_folder, build_backbone
from steerable.policy.checkpoint import latest_checkpoint, load_policy, read_training_state
from steerable.policy.config import AUTO_ACTION_KEY, AUTO_STATE_KEY, PolicyConfig
from steerable.policy.data import fit_normalizer, split_episodes
from steerable.policy.goal import has_goal_head
from steerable.policy.model import HierarchicalPolicy
from steerable.policy.objects import object_layout, object_tokens, resolve_objects
from steerable.policy.processor import Processor
from steerable.policy.tokenizer import build_tiny_tokenizer, corpus_from_dataset, load_tokenizer

__all__ = ["Built", "build_fresh", "dataset_policy_config", "resume_from"]

logger = logging.getLogger(__name__)

# LeRobot's feature of where the scene's objects are (the simulator's privileged state writes it).
ENVIRONMENT_STATE_KEY = "observation.environment_state"


@dataclass
class Built:
    model: HierarchicalPolicy
    processor: Processor
    train_episodes: list[int]
    eval_episodes: list[int]
    state: dict[str, Any]  # trainer state to resume from ({} for a fresh run)
    checkpoint: Path | None = None


def dataset_policy_config(dataset: LeRobotDataset, overrides: dict[str, Any]) -> PolicyConfig:
    """The policy config for `dataset`: its cameras, state and action sizes and names, the objects its
    description declares (`meta/objects.json`, over the policy's state features), then the user's
    overrides. `state_key` auto: `observation.state` (else `state`), and the privileged environment
    state after it when the dataset has one (a policy that then needs `--observation privileged` to
    run); `action_key` auto: `action` (else `actions`). The names are annotate's (`dataset.frames`)."""
    overrides = {k: v for k, v in overrides.items() if v is not None}
    if overrides.get("state_key", AUTO_STATE_KEY).strip() == AUTO_STATE_KEY:
        keys = [_found(dataset, STATE_KEYS, "state")] + [k for k in (ENVIRONMENT_STATE_KEY,) if k in dataset.features]
        overrides["state_key"] = ",".join(keys)
    if overrides.get("action_key", AUTO_ACTION_KEY).strip() == AUTO_ACTION_KEY:
        overrides["action_key"] = _found(dataset, ACTION_KEYS, "action")
    located = str(overrides.get("locate_key") or "").strip()
    if located:
        keys = [k.strip() for k in overrides["state_key"].split(",") if k.strip() and k.strip() != located]
        overrides["state_key"] = ",".join([*keys, located])  # the located feature goes last
        if located not in dataset.features:
            raise ConfigError(f"--policy.locate_key {located!r}: the dataset does not record it (name a feature "
                              "it has; `steerable make-dataset` records observation.environment_state with "
                              "--privileged_state)")
    cfg = PolicyConfig.from_dict(overrides)
    # No cameras given: every camera of the dataset; `none`: no camera at all (a state-only policy).
    cameras = [] if [c.lower() for c in cfg.cameras] == ["none"] else cfg.cameras or list(dataset.camera_keys)
    missing = [c for c in cameras if c not in dataset.camera_keys]
    if missing:
        raise ConfigError(f"--policy.cameras {missing} not in the dataset (cameras: {dataset.camera_keys})")
    if cfg.locate_key:
        if not cameras:
            raise ConfigError("--policy.locate_key estimates a state feature from a camera: the policy has none")
        camera = cfg.locate_camera or cameras[0]
        if camera not in cameras:
            raise ConfigError(f"--policy.locate_camera {camera!r} is not one of the policy's cameras {cameras}")
        cfg = cfg.override(locate_camera=camera)
    dims = {"state": 0, "action": 0}
    located_dim = 0  # the width of the located feature (the last state key), 0 without one
    names: dict[str, list[str] | None] = {"state": [], "action": []}
    for role, key in [*(("state", k) for k in cfg.state_keys), ("action", cfg.action_key)]:
        feature = dataset.features.get(key)
        if feature is None:
            numeric = [k for k, v in dataset.features.items() if v.get("dtype") not in ("video", "image", "string",
                                                                                          "language")]
            raise ConfigError(f"the dataset has no {role} feature {key!r} (numeric features: {numeric}); "
                              f"pass --policy.{role}_key")
        size = int(torch.tensor(feature.get("shape") or [1]).prod())
        dims[role] += size
        located_dim = size if key == cfg.locate_key else located_dim
        given = feature.get("names")
        known = names[role]
        # Names of every dimension, or none at all (then nothing is relative and no object is grounded).
        names[role] = known + [str(n) for n in given] if known is not None and isinstance(given, list) and \
            len(given) == size else None
    if names["state"] is None or names["action"] is None:
        logger.warning("the dataset does not name every state and action dimension: actions stay absolute "
                       "and no object is grounded")
    schema = read_object_schema(dataset.root)
    layout = None if schema is None else resolve_objects(schema, cfg.state_keys, dataset.features)
    if layout is None:
        logger.info("the dataset describes no object in the policy's state (%s): no object grounding or object "
                    "name slots; with cameras, a goal head and a step check from the cameras", OBJECTS_PATH)
    slots = cfg.name_slots or (layout.name_groups() if layout is not None and cfg.object_name_slots else [])
    cfg = cfg.override(cameras=cameras, state_key=",".join(cfg.state_keys), state_dim=dims["state"],
                       located=located_dim, action_dim=dims["action"], state_names=names["state"] or [],
                       action_names=names["action"] or [], name_slots=slots,
                       objects={} if layout is None else layout.to_dict())
    if "motion_input" not in overrides and has_goal_head(cfg):
        # From the cameras the last commanded motion is a shortcut: the low level continued or ended its own
        # motion instead of following the goal (places let go 3-6 cm short); without it, 0.62 against 0.38
        # under the scripted planner (docs/policy.md, "Stop 54"). A state that holds the objects keeps it.
        cfg = cfg.override(motion_input=False)
    return cfg


def _found(dataset: LeRobotDataset, names: tuple[str, ...], role: str) -> str:
    """The dataset's `role` feature, picked by name as annotate picks it (`dataset.frames.pick_feature`)."""
    key = pick_feature(dataset.features, names)
    if key is None:
        raise ConfigError(f"the dataset has no {role} feature named {' or '.join(names)} (its float vectors: "
                          f"{float_vectors(dataset.features) or 'none'}): pass --policy.{role}_key NAME")
    return key


def build_fresh(dataset: LeRobotDataset, overrides: dict[str, Any], eval_fraction: float, seed: int,
                episodes: Sequence[int] | None = None) -> Built:
    cfg = dataset_policy_config(dataset, overrides)
    train_eps, eval_eps = split_episodes(dataset, eval_fraction, seed, episodes)
    normalizer = fit_normalizer(dataset, cfg, train_eps)
    if cfg.is_tiny:
        tokenizer = build_tiny_tokenizer(corpus_from_dataset(dataset), cfg.tiny_vocab_size)
    else:
        tokenizer = load_tokenizer(backbone_folder(cfg.backbone))
    layout = object_layout(cfg)
    if cfg.ground_objects and layout is not None:
        cfg = cfg.override(object_tokens=object_tokens([o.name for o in layout.objects], tokenizer))
    torch.manual_seed(seed)
    backbone, size = build_backbone(cfg, len(tokenizer))
    model = HierarchicalPolicy(cfg, backbone)
    model.calibrate(normalizer)
    processor = Processor(cfg, tokenizer, normalizer, size, dataset.tools)
    return Built(model, processor, train_eps, eval_eps, {})


def resume_from(output_dir: Path) -> Built | None:
    """The run saved under `output_dir`, or None when it holds no training checkpoint."""
    where = latest_checkpoint(output_dir)
    if where is None or not (where / "trainer_state.json").is_file():
        return None
    state = read_training_state(where)
    loaded = load_policy(where)
    model, processor = loaded.model.train(), loaded.processor
    logger.info("resuming from %s (step %d)", where, state["step"])
    return Built(model, processor, list(state["train_episodes"]), list(state["eval_episodes"]), state, where)
