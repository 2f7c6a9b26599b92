"""Hierarchical vision-language-action policy: a VLM backbone that writes subtasks, plans, memory
and `say` replies, and a flow-matching action expert conditioned on them; trainer and inference.

Needs the `policy` extra (torch, transformers, safetensors). Names load lazily, so importing the
package costs nothing until one is used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from steerable.errors import MissingExtraError
from steerable.lazy import lazy_exports

if TYPE_CHECKING:
    from steerable.policy.checkpoint import LoadedPolicy, load_policy
    from steerable.policy.config import PolicyConfig
    from steerable.policy.generation import GenerationConfig, ParsedReply, parse_reply
    from steerable.policy.inference import PolicyObservation
    from steerable.policy.lerobot import SteerablePolicy
    from steerable.policy.model import HierarchicalPolicy
    from steerable.policy.settings import TrainConfig
    from steerable.policy.trainer import train

__all__ = [
    "GenerationConfig",
    "HierarchicalPolicy",
    "LoadedPolicy",
    "ParsedReply",
    "PolicyConfig",
    "PolicyObservation",
    "SteerablePolicy",
    "TrainConfig",
    "load_policy",
    "parse_reply",
    "train",
]

__getattr__ = lazy_exports(
    __name__,
    {
        **dict.fromkeys(("GenerationConfig", "ParsedReply", "parse_reply"), "generation"),
        "HierarchicalPolicy": "model",
        **dict.fromkeys(("LoadedPolicy", "load_policy"), "checkpoint"),
        "PolicyConfig": "config",
        "PolicyObservation": "inference",
        "SteerablePolicy": "lerobot",
        "TrainConfig": "settings",
        "train": "trainer",
    },
    needs=("torch", "transformers", "safetensors", "tokenizers"),
    missing=lambda package: MissingExtraError(package, "policy"),
)
