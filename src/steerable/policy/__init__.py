"""Hierarchical vision-language-action policy: a VLM backbone that writes subtasks, plans, memory
and `say` replies, and a flow-matching action expert conditioned on them; trainer and inference.

Needs the `policy` extra (torch, transformers, safetensors). Names load lazily, so importing the
package costs nothing until one is used.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from steerable.errors import MissingExtraError

if TYPE_CHECKING:
    from steerable.policy.checkpoint import LoadedPolicy, load_policy
    from steerable.policy.config import PolicyConfig
    from steerable.policy.generation import GenerationConfig, ParsedReply, parse_reply
    from steerable.policy.lerobot import SteerablePolicy
    from steerable.policy.model import HierarchicalPolicy
    from steerable.policy.trainer import TrainConfig, train

__all__ = [
    "GenerationConfig",
    "HierarchicalPolicy",
    "LoadedPolicy",
    "ParsedReply",
    "PolicyConfig",
    "SteerablePolicy",
    "TrainConfig",
    "load_policy",
    "parse_reply",
    "train",
]

_LAZY = {
    "GenerationConfig": "steerable.policy.generation",
    "ParsedReply": "steerable.policy.generation",
    "parse_reply": "steerable.policy.generation",
    "HierarchicalPolicy": "steerable.policy.model",
    "LoadedPolicy": "steerable.policy.checkpoint",
    "load_policy": "steerable.policy.checkpoint",
    "PolicyConfig": "steerable.policy.config",
    "SteerablePolicy": "steerable.policy.lerobot",
    "TrainConfig": "steerable.policy.trainer",
    "train": "steerable.policy.trainer",
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'steerable.policy' has no attribute {name!r}")
    try:
        value = getattr(importlib.import_module(_LAZY[name]), name)
    except ImportError as exc:
        top = (exc.name or "").split(".")[0]
        if top in ("torch", "transformers", "safetensors", "tokenizers"):
            raise MissingExtraError(top, "policy") from exc
        raise
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
