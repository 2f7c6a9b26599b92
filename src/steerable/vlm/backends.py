"""The one registry of VLM backends: a name (`--vlm.backend NAME`) for each, and what `auto` picks.

An entry is a `VLMBackend`, or the "module:attribute" path of one, imported when the backend is
first looked up (so `--help` and the settings stay cheap). Adding a backend is one module, with
its client class and its `BACKEND = VLMBackend(...)`, and one line here:

    BACKENDS["mine"] = "my_package.my_vlm:BACKEND"

`--vlm.backend auto` tries the entries in this order and takes the first whose `picks` says yes;
none (no URL, no vLLM on a GPU) means no model, and `annotate` uses its model-free annotator.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from importlib import import_module
from typing import TYPE_CHECKING

from steerable.errors import ConfigError
from steerable.settings import check_choice

if TYPE_CHECKING:
    from steerable.vlm.config import VLMConfig
    from steerable.vlm.protocol import VLMClient

__all__ = ["AUTO", "BACKENDS", "VLMBackend", "backend_names", "check_backend_name", "get_backend", "resolve_backend"]

AUTO = "auto"


@dataclass(frozen=True)
class VLMBackend:
    """How one backend is built, and when `auto` picks it."""

    client: Callable[[VLMConfig], VLMClient]  # the client; starts nothing (`serve` does)
    # What must run while the client is used (vLLM replicas): entered before the client is built.
    serve: Callable[[VLMConfig], AbstractAsyncContextManager[object]] | None = None
    needs_model_id: bool = False  # refused without --vlm.model_id (a Hugging Face id or local path)
    picks: Callable[[VLMConfig], bool] | None = None  # whether `auto` picks it; None: never


BACKENDS: dict[str, str | VLMBackend] = {
    "openai": "steerable.vlm.openai_http:BACKEND",
    "vllm": "steerable.vlm.launcher:BACKEND",
    "transformers": "steerable.vlm.transformers_local:BACKEND",
}


def backend_names() -> tuple[str, ...]:
    """Every value `--vlm.backend` takes: `auto`, then the registered names."""
    return (AUTO, *BACKENDS)


def check_backend_name(name: str) -> str:
    """`name`, when `--vlm.backend` takes it; else the one-line refusal, the same from the settings and from code."""
    check_choice("--vlm.backend", name, backend_names())
    return name


def get_backend(name: str) -> VLMBackend:
    """The registered backend `name` (its module imported on first use)."""
    entry = BACKENDS.get(check_backend_name(name))
    if entry is None:  # `auto`, which names no backend: resolve_backend decides
        raise ConfigError(f"--vlm.backend {AUTO} names no backend of its own: resolve_backend decides which")
    if isinstance(entry, VLMBackend):
        return entry
    module, _, attribute = entry.partition(":")
    found = getattr(import_module(module), attribute)
    if not isinstance(found, VLMBackend):
        raise TypeError(f"VLM backend {name!r}: {entry} is not a VLMBackend")
    return found


def resolve_backend(config: VLMConfig) -> str | None:
    """The backend `config` selects, decided here and nowhere else; for `auto`, None means no model."""
    if config.backend != AUTO:
        return config.backend
    for name in BACKENDS:
        picks = get_backend(name).picks
        if picks is not None and picks(config):
            return name
    return None
