"""Training data from annotated datasets: a PyTorch dataset, collate, chat tokenization, export.

Names load lazily, so `import steerable.train` needs neither torch nor transformers; the names
that need torch raise MissingExtraError (extra `train`) when it is not installed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from steerable.errors import MissingExtraError
from steerable.lazy import lazy_exports

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

# Only RecipeDataset and collate need torch; the others are torch-free.
__getattr__ = lazy_exports(
    __name__,
    {
        "RecipeDataset": "torch_dataset",
        "collate": "collation",
        **dict.fromkeys(("ChatTokenizer", "TokenizedSample", "IGNORE_INDEX"), "tokenize"),
        **dict.fromkeys(("ExportReport", "export_samples", "openai_messages"), "export"),
        **dict.fromkeys(("DatasetRenderer", "FrameSample", "task_fallback"), "samples"),
    },
    needs=("torch",),
    missing=lambda package: MissingExtraError(package, "train"),
)
