"""Training data from annotated datasets: a PyTorch dataset, collate, chat tokenization, export.

Names load lazily, so `import steerable.train` needs neither torch nor transformers; the names
that need torch raise MissingExtraError (extra `train`) when it is not installed.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from steerable.errors import MissingExtraError

if TYPE_CHECKING:
    from steerable.train.collation import collate
    from steerable.train.export import ExportReport, export_samples, openai_messages
    from steerable.train.samples import DatasetRenderer, FrameSample, task_fallback
    from steerable.train.tokenize import IGNORE_INDEX, ChatTokenizer, TokenizedSample
    from steerable.train.torch_dataset import RecipeDataset

__all__ = [
    "IGNORE_INDEX",
    "ChatTokenizer",
    "DatasetRenderer",
    "ExportReport",
    "FrameSample",
    "RecipeDataset",
    "TokenizedSample",
    "collate",
    "export_samples",
    "openai_messages",
    "task_fallback",
]

# name -> (module, the optional package it needs or None)
_LAZY: dict[str, tuple[str, str | None]] = {
    "RecipeDataset": ("steerable.train.torch_dataset", "torch"),
    "collate": ("steerable.train.collation", "torch"),
    "ChatTokenizer": ("steerable.train.tokenize", None),
    "TokenizedSample": ("steerable.train.tokenize", None),
    "IGNORE_INDEX": ("steerable.train.tokenize", None),
    "ExportReport": ("steerable.train.export", None),
    "export_samples": ("steerable.train.export", None),
    "openai_messages": ("steerable.train.export", None),
    "DatasetRenderer": ("steerable.train.samples", None),
    "FrameSample": ("steerable.train.samples", None),
    "task_fallback": ("steerable.train.samples", None),
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'steerable.train' has no attribute {name!r}")
    module, needs = _LAZY[name]
    try:
        value = getattr(importlib.import_module(module), name)
    except ImportError as exc:
        if needs is not None and (exc.name or "").split(".")[0] == needs:
            raise MissingExtraError(needs, "train") from exc
        raise
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
