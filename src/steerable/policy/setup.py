"""Build what a training run needs: a fresh policy from a dataset, or the state of a run to resume."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from steerable.dataset import LeRobotDataset
from steerable.errors import ConfigError
from steerable.policy.backbone import backbone_folder, build_backbone
from steerable.policy.checkpoint import latest_checkpoint, load_policy, read_training_state
from steerable.policy.config import PolicyConfig
from steerable.policy.data import fit_normalizer, split_episodes
from steerable.policy.model import HierarchicalPolicy
from steerable.policy.processor import Processor
from steerable.policy.tokenizer import build_tiny_tokenizer, corpus_from_dataset, load_tokenizer

__all__ = ["Built", "build_fresh", "dataset_policy_config", "resume_from"]

logger = logging.getLogger(__name__)


@dataclass
class Built:
    model: HierarchicalPolicy
    processor: Processor
    train_episodes: list[int]
    eval_episodes: list[int]
    state: dict[str, Any]  # trainer state to resume from ({} for a fresh run)
    checkpoint: Path | None = None


def dataset_policy_config(dataset: LeRobotDataset, overrides: dict[str, Any]) -> PolicyConfig:
    """The policy config for `dataset`: its cameras, state and action sizes, then the user's overrides."""
    cfg = PolicyConfig.from_dict({k: v for k, v in overrides.items() if v is not None})
    cameras = cfg.cameras or list(dataset.camera_keys)
    missing = [c for c in cameras if c not in dataset.camera_keys]
    if missing:
        raise ConfigError(f"--policy.cameras {missing} not in the dataset (cameras: {dataset.camera_keys})")
    dims = {"state": 0, "action": 0}
    for role, key in [*(("state", k) for k in cfg.state_keys), ("action", cfg.action_key)]:
        feature = dataset.features.get(key)
        if feature is None:
            numeric = [k for k, v in dataset.features.items() if v.get("dtype") not in ("video", "image", "string",
                                                                                          "language")]
            raise ConfigError(f"the dataset has no {role} feature {key!r} (numeric features: {numeric}); "
                              f"pass --policy.{role}_key")
        dims[role] += int(torch.tensor(feature.get("shape") or [1]).prod())
    return cfg.override(cameras=cameras, state_key=",".join(cfg.state_keys), state_dim=dims["state"],
                        action_dim=dims["action"])


def build_fresh(dataset: LeRobotDataset, overrides: dict[str, Any], eval_fraction: float, seed: int,
                episodes: Sequence[int] | None = None) -> Built:
    cfg = dataset_policy_config(dataset, overrides)
    train_eps, eval_eps = split_episodes(dataset, eval_fraction, seed, episodes)
    normalizer = fit_normalizer(dataset, cfg, train_eps)
    if cfg.is_tiny:
        tokenizer = build_tiny_tokenizer(corpus_from_dataset(dataset), cfg.tiny_vocab_size)
    else:
        tokenizer = load_tokenizer(backbone_folder(cfg.backbone))
    torch.manual_seed(seed)
    backbone, size = build_backbone(cfg, len(tokenizer))
    model = HierarchicalPolicy(cfg, backbone)
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
