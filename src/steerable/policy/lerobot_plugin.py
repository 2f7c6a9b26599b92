"""steerable's hierarchical policy as a LeRobot policy: `--policy.type=steerable_hierarchical`.

Imported by LeRobot's plugin discovery through the `lerobot_policy_steerable` distribution
(`plugins/` in the repository), never by steerable itself: it imports lerobot at the top. LeRobot's
factory finds the three names by its naming convention, all in this module:
`SteerableHierarchicalConfig` (the registered config), `SteerableHierarchicalPolicy` (`<Name>Policy`)
and `make_steerable_hierarchical_pre_post_processors`.

The config holds every `PolicyConfig` setting under its own name (`--policy.chunk_size`, ...), mirrored
from the dataclass so a new setting is a flag at once, plus `recipe` and the optimiser presets. A
fresh policy (`lerobot-train --policy.type=...`) is built from the training dataset the way `steerable
train` builds one (tokenizer, normalisation statistics, sizes); a loaded one is `load_policy`'s. Either
way the checkpoint LeRobot saves is a steerable checkpoint (`write_policy_files`), so it runs in
`steerable run --policy.path` as it is. Normalisation happens inside the policy; the processors are
LeRobot's default pipeline with an identity (un)normaliser, there for the overrides LeRobot's scripts
pass to them. LeRobot's real-time chunking (`lerobot-rollout --inference.type=rtc`) runs through
steerable's guided inpainting (`steerable.policy.rtc`), weighted by LeRobot's RTC settings.
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import draccus
import numpy as np
import torch
from lerobot.configs import FeatureType, NormalizationMode, PreTrainedConfig
from lerobot.optim import AdamWConfig, CosineDecayWithWarmupSchedulerConfig
from lerobot.policies.pretrained import PreTrainedPolicy
from lerobot.policies.rtc import RTCConfig, RTCProcessor
from lerobot.processor import make_default_pre_post_processors

from steerable.control import ChunkPrefix
from steerable.dataset import open_dataset
from steerable.errors import ConfigError
from steerable.policy.checkpoint import (
    LoadedPolicy,
    dataset_provenance,
    latest_checkpoint,
    load_policy,
    write_policy_files,
)
from steerable.policy.config import AUTO_STATE_KEY, PolicyConfig
from steerable.policy.inference import PolicyObservation, PolicyRunner
from steerable.policy.lerobot import LeRobotInterface, TrainingFrames
from steerable.policy.lerobot_format import FORMAT, IDENTITY_NORMALIZATION, LEROBOT_TYPE
from steerable.policy.rtc import guided_chunk
from steerable.policy.settings import FROM_DATASET
from steerable.policy.setup import build_fresh
from steerable.recipes import load_recipe

__all__ = [
    "SteerableHierarchicalConfig", "SteerableHierarchicalPolicy", "make_steerable_hierarchical_pre_post_processors",
]

_POLICY_FIELDS = tuple(f.name for f in dataclasses.fields(PolicyConfig))


def _identity() -> dict[str, NormalizationMode]:
    return {kind: NormalizationMode(mode) for kind, mode in IDENTITY_NORMALIZATION.items()}


@PreTrainedConfig.register_subclass(LEROBOT_TYPE)
@dataclass
class SteerableHierarchicalConfig(PreTrainedConfig):
    """LeRobot's config of the hierarchical policy: every `PolicyConfig` setting, and how to train it."""

    # The steerable recipe (built-in name or YAML path) training renders the language columns through.
    recipe: str = "hierarchical"
    format: int = FORMAT
    trained_on: dict[str, str] = field(default_factory=dict)
    normalization_mapping: dict[str, NormalizationMode] = field(default_factory=_identity)
    # The optimiser and schedule of `steerable train`'s defaults (LeRobot's `use_policy_training_preset`).
    optimizer_lr: float = 1e-3
    optimizer_weight_decay: float = 0.01
    optimizer_grad_clip_norm: float = 1.0
    scheduler_warmup_steps: int = 100
    scheduler_decay_steps: int = 2500

    # One field per PolicyConfig setting, with its default; the state keys default to `auto`, as in
    # `steerable train`. The goal head is off: `lerobot-train` runs no phase of its own for it, and trained
    # with the rest it learnt nothing (docs/policy.md, "From pixels"); `--policy.goal_head=true` asks for it.
    _hints = typing.get_type_hints(PolicyConfig)
    for _f in dataclasses.fields(PolicyConfig):
        __annotations__[_f.name] = _hints[_f.name]
        if _f.name == "state_key":
            locals()[_f.name] = AUTO_STATE_KEY
        elif _f.name == "goal_head":
            locals()[_f.name] = False
        elif _f.default is not dataclasses.MISSING:
            locals()[_f.name] = _f.default
        else:
            locals()[_f.name] = field(default_factory=_f.default_factory)
    del _hints, _f

    def __post_init__(self) -> None:
        super().__post_init__()
        self.policy_config()  # PolicyConfig's own checks

    def policy_config(self) -> PolicyConfig:
        return PolicyConfig.from_dict({name: getattr(self, name) for name in _POLICY_FIELDS})

    def take(self, cfg: PolicyConfig) -> None:
        """Set every `PolicyConfig` setting from `cfg` (a built or loaded policy's)."""
        for name, value in cfg.to_dict().items():
            setattr(self, name, value)

    @property
    def observation_delta_indices(self) -> None:
        return None

    @property
    def action_delta_indices(self) -> list[int]:
        return list(range(self.chunk_size))

    @property
    def reward_delta_indices(self) -> None:
        return None

    def get_optimizer_preset(self) -> AdamWConfig:
        return AdamWConfig(lr=self.optimizer_lr, weight_decay=self.optimizer_weight_decay,
                           grad_clip_norm=self.optimizer_grad_clip_norm)

    def get_scheduler_preset(self) -> CosineDecayWithWarmupSchedulerConfig:
        return CosineDecayWithWarmupSchedulerConfig(
            num_warmup_steps=self.scheduler_warmup_steps, num_decay_steps=self.scheduler_decay_steps,
            peak_lr=self.optimizer_lr, decay_lr=self.optimizer_lr * 0.1)

    def validate_features(self) -> None:
        """The cameras the policy reads must be image features of its inputs (when both are known)."""
        images = {k for k, f in (self.input_features or {}).items() if f.type is FeatureType.VISUAL}
        missing = [c for c in self.cameras if images and c not in images]
        if missing:
            raise ConfigError(f"policy cameras {missing} are not among the image features {sorted(images)}")


class SteerableHierarchicalPolicy(LeRobotInterface, PreTrainedPolicy):
    """The hierarchical policy as a LeRobot `PreTrainedPolicy` (methods: `LeRobotInterface`)."""

    config_class = SteerableHierarchicalConfig
    name = LEROBOT_TYPE

    def __init__(self, config: SteerableHierarchicalConfig, dataset_meta: Any = None,
                 dataset_stats: Any = None, loaded: LoadedPolicy | None = None, **kwargs: Any) -> None:
        PreTrainedPolicy.__init__(self, config)
        dataset = open_dataset(Path(dataset_meta.root)) if dataset_meta is not None else None
        if loaded is None:
            if dataset is None:
                raise ConfigError("a fresh steerable_hierarchical policy is built from its training dataset "
                                  "(lerobot-train --dataset.root/--dataset.repo_id); to evaluate one, pass "
                                  "--policy.path CHECKPOINT")
            overrides = {k: v for k, v in config.policy_config().to_dict().items() if k not in FROM_DATASET}
            built = build_fresh(dataset, overrides, 0.0, 0)
            recipe = load_recipe(config.recipe)
            recipe_text = Path(recipe.origin).read_text(encoding="utf-8")
            loaded = LoadedPolicy(built.model, built.processor, recipe_text, Path(dataset.root))
            config.take(built.model.cfg)  # the sizes, names and state keys read from the dataset
            config.trained_on = {k: str(v) for k, v in dataset_provenance(dataset).items()}
        elif dataset is not None:  # fine-tuning a checkpoint: on the recipe it was trained on
            recipe = load_recipe(str(Path(loaded.path) / "recipe.yaml"))
        self.loaded = loaded
        self.model = loaded.model
        self._rtc: RTCProcessor | None = None  # LeRobot's RTC settings, once it asks for them
        frames = TrainingFrames(dataset, recipe, loaded.model.cfg) if dataset is not None else None
        self._start_interface(PolicyRunner(loaded, config.device or "cpu"), frames)

    @classmethod
    def from_pretrained(cls, pretrained_name_or_path: str | Path, *, config: PreTrainedConfig | None = None,
                        **kwargs: Any) -> SteerableHierarchicalPolicy:
        """The checkpoint at `pretrained_name_or_path` (a local folder) with `config`'s run-time settings
        (device, `n_action_steps`, `flow_steps`, ...); the network is the checkpoint's."""
        where = latest_checkpoint(Path(pretrained_name_or_path))
        if where is None:
            raise ConfigError(f"{pretrained_name_or_path} holds no steerable policy checkpoint "
                              "(config.json + model.safetensors)")
        if config is None:
            config = PreTrainedConfig.from_pretrained(where)
        if not isinstance(config, SteerableHierarchicalConfig):
            raise ConfigError(f"{where} is a {config.type} checkpoint, not {LEROBOT_TYPE}")
        hub = {"force_download", "resume_download", "proxies", "token", "cache_dir", "local_files_only",
               "revision", "strict"}
        extra = {k: v for k, v in kwargs.items() if k not in hub}
        policy = cls(config, loaded=load_policy(where, config.device or "cpu"), **extra)
        policy.to(config.device or "cpu")
        policy.eval()
        return policy

    def _save_pretrained(self, save_directory: Path,
                         state_dict: dict[str, torch.Tensor] | None = None) -> None:
        """A steerable checkpoint whose config.json is this LeRobot config (with its `type`)."""
        config = draccus.encode(self.config, PreTrainedConfig)
        config["format"] = FORMAT
        config.update(self.model.cfg.to_dict())
        loaded = self.loaded
        write_policy_files(Path(save_directory), self.model, loaded.processor, loaded.recipe_text, config)

    def get_optim_params(self) -> Any:
        return [p for p in self.parameters() if p.requires_grad]

    def supports_rtc(self) -> bool:
        """LeRobot's real-time chunking (`lerobot-rollout --inference.type=rtc`): a chunk continues
        the previous one's leftover actions by steerable's guided inpainting (`steerable.policy.rtc`)."""
        return True

    def init_rtc_processor(self) -> None:
        """The prefix weights of LeRobot's `--inference.rtc.*` settings (LeRobot calls this after
        setting `config.rtc_config`)."""
        self._rtc = RTCProcessor(getattr(self.config, "rtc_config", None) or RTCConfig())

    def _act(self, subtasks: list[str], obs: PolicyObservation, inference_delay: int = 0,
             prev_chunk_left_over: torch.Tensor | None = None, **kwargs: Any) -> np.ndarray:
        """The chunk for each subtask; with LeRobot's RTC arguments, its start guided onto the
        `prev_chunk_left_over` (T, A) actions (robot units: the postprocessor is the identity), held on
        the first `inference_delay` steps, then by LeRobot's schedule up to its execution horizon."""
        if prev_chunk_left_over is None:
            return super()._act(subtasks, obs)
        left = torch.as_tensor(prev_chunk_left_over).float().cpu()
        left = left[0] if left.ndim == 3 and left.shape[0] == 1 else left
        if left.ndim != 2 or len(subtasks) != 1:
            raise ValueError(f"real-time chunking runs one env with a (T, A) leftover; got {len(subtasks)} envs "
                             f"and a leftover of shape {tuple(prev_chunk_left_over.shape)}")
        # LeRobot pads the leftover with zero rows to its execution horizon: those are not actions.
        real = int(left.abs().sum(-1).nonzero().max()) + 1 if left.abs().sum() > 0 else 0
        left = left[: min(real, self.model.cfg.chunk_size)]
        if not len(left):  # the previous chunk has run out: nothing to continue
            return super()._act(subtasks, obs)
        if self._rtc is None:
            self.init_rtc_processor()
        assert self._rtc is not None
        rtc = self._rtc.rtc_config
        weights = self._rtc.get_prefix_weights(inference_delay, min(rtc.execution_horizon, len(left)), len(left))
        prefix = ChunkPrefix(left.numpy(), weights.numpy(), int(inference_delay), float(rtc.max_guidance_weight))
        return guided_chunk(self.runner, subtasks[0], obs, prefix, steps=self.config.flow_steps)[None]


def make_steerable_hierarchical_pre_post_processors(config: SteerableHierarchicalConfig,
                                                    dataset_stats: Any = None) -> tuple[Any, Any]:
    """LeRobot's default pipeline pair (rename, batch, device, identity normaliser; identity
    unnormaliser, to cpu): the policy normalises with its own statistics."""
    return make_default_pre_post_processors(config, None)
