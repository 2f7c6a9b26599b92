"""Build the configured VLM client: `make_vlm` constructs one, `open_vlm` also runs its lifecycle.

Which backend runs is decided by `backends.resolve_backend` (the registry's `auto` order: an
explicit server URL first, then local vLLM replicas when vLLM and a GPU are present); with
neither, there is no model and callers fall back to the model-free (proprioception) annotator.
The scripted test double is never picked here.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator

from steerable.errors import ConfigError, VLMError
from steerable.vlm.backends import VLMBackend, get_backend, resolve_backend
from steerable.vlm.config import VLMConfig
from steerable.vlm.launcher import detect_gpus, vllm_available
from steerable.vlm.protocol import VLMClient

__all__ = ["NO_MODEL_MESSAGE", "make_vlm", "open_vlm", "resolve_backend", "vllm_available"]

log = logging.getLogger(__name__)

NO_MODEL_MESSAGE = (
    "no VLM is configured: pass --vlm.base_url with an OpenAI-compatible server (and --vlm.model_id), "
    "or install vLLM on a GPU machine; without a model the proprioception annotator is used"
)


def _chosen(config: VLMConfig) -> tuple[str, VLMBackend]:
    name = resolve_backend(config)
    if name is None:
        if vllm_available() and detect_gpus():
            raise VLMError("vLLM and a GPU are available: pass --vlm.model_id to serve a model with them")
        raise VLMError(NO_MODEL_MESSAGE)
    backend = get_backend(name)
    if backend.needs_model_id and not config.model_id:
        raise ConfigError(f"--vlm.backend {name} needs --vlm.model_id (a Hugging Face id or local path)")
    return name, backend


def make_vlm(config: VLMConfig) -> VLMClient:
    """A client for the configured backend (nothing is started: see `open_vlm` for vLLM replicas).

    Raises:
        VLMError: `auto` found no model to use (message: NO_MODEL_MESSAGE).
        ConfigError: the chosen backend lacks a required setting.
        MissingExtraError: the backend's optional package is not installed.
    """
    return _chosen(config)[1].client(config)


@contextlib.asynccontextmanager
async def open_vlm(config: VLMConfig) -> AsyncIterator[VLMClient]:
    """The configured client, checked and ready; starts (and stops) what its backend serves from."""
    name, backend = _chosen(config)
    async with contextlib.AsyncExitStack() as stack:
        if backend.serve is not None:
            await stack.enter_async_context(backend.serve(config))
        vlm = backend.client(config)
        stack.push_async_callback(vlm.aclose)
        await vlm.check()
        log.info("VLM ready: backend=%s model=%s", name, config.model_id)
        yield vlm
