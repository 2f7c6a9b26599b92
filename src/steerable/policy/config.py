"""The policy's configuration: backbone, action expert, state encoding, losses; saved as JSON.

One dataclass holds everything a checkpoint needs to rebuild the same network, so loading a
checkpoint never depends on the flags of the run that made it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal

from steerable.errors import ConfigError

__all__ = ["PolicyConfig", "StateMode"]

StateMode = Literal["bins", "projector", "none"]


@dataclass
class PolicyConfig:
    """How to build the hierarchical policy.

    `backbone` is `"tiny"` (an Idefics3 model with a small Llama text tower and a small SigLIP
    vision tower, built in code with random weights) or a local folder holding an
    `AutoModelForImageTextToText` checkpoint and its tokenizer (SmolVLM / Idefics3 family).
    `state_mode`: `"bins"` puts the normalised state into the prefix as one token per dimension,
    discretised into `state_bins` bins over [-1, 1]; `"projector"` projects the state to one prefix
    token; `"none"` leaves it out. The action expert reads the outputs of the last `expert_layers`
    backbone layers (one expert layer per backbone layer read). `state_key` names one state feature,
    or several comma-separated (`observation.state,observation.environment_state`), concatenated in
    that order into one state vector of `state_dim` values (`state_keys` lists them).
    """

    backbone: str = "tiny"
    cameras: list[str] = field(default_factory=list)
    state_key: str = "observation.state"
    action_key: str = "action"
    state_dim: int = 0
    action_dim: int = 0
    chunk_size: int = 10
    n_action_steps: int = 10
    image_size: int = 32
    state_mode: StateMode = "bins"
    state_bins: int = 256
    expert_layers: int = 2
    expert_hidden: int = 64
    expert_heads: int = 4
    freeze_vision: bool = False
    flow_steps: int = 10
    text_loss_weight: float = 1.0
    flow_loss_weight: float = 1.0
    max_length: int = 256
    # Tiny backbone sizes (ignored for a backbone loaded from a folder).
    tiny_hidden: int = 64
    tiny_layers: int = 2
    tiny_heads: int = 4
    tiny_vision_hidden: int = 32
    tiny_vision_layers: int = 1
    tiny_patch_size: int = 8
    tiny_vocab_size: int = 512

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        if not self.state_keys:
            raise ConfigError(f"policy.state_key names no feature: {self.state_key!r}")
        if self.state_mode not in ("bins", "projector", "none"):
            raise ConfigError(f"state_mode must be bins, projector or none, got {self.state_mode!r}")
        positive = ("chunk_size", "n_action_steps", "image_size", "state_bins", "expert_layers", "expert_hidden",
                    "expert_heads", "flow_steps", "max_length", "tiny_hidden", "tiny_layers", "tiny_heads")
        for name in positive:
            if int(getattr(self, name)) < 1:
                raise ConfigError(f"policy.{name} must be at least 1, got {getattr(self, name)}")
        if self.n_action_steps > self.chunk_size:
            raise ConfigError(f"policy.n_action_steps ({self.n_action_steps}) cannot exceed "
                              f"policy.chunk_size ({self.chunk_size})")
        if self.expert_hidden % self.expert_heads:
            raise ConfigError(f"policy.expert_hidden ({self.expert_hidden}) must be a multiple of "
                              f"policy.expert_heads ({self.expert_heads})")
        if self.text_loss_weight < 0 or self.flow_loss_weight < 0:
            raise ConfigError("loss weights must be >= 0")

    @property
    def state_keys(self) -> list[str]:
        """The state features, in the order they are concatenated (`state_key` split on commas)."""
        return [k.strip() for k in self.state_key.split(",") if k.strip()]

    @property
    def is_tiny(self) -> bool:
        return self.backbone == "tiny"

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PolicyConfig:
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise ConfigError(f"unknown policy setting(s) {unknown}; known: {sorted(names)}")
        return cls(**data)

    def override(self, **changes: Any) -> PolicyConfig:
        """A copy with `changes` applied (unknown names are a ConfigError)."""
        return PolicyConfig.from_dict({**self.to_dict(), **changes})
