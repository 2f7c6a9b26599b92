"""Build the configured VLM client: `make_vlm` constructs one, `open_vlm` also runs its lifecycle.

`--vlm.backend auto` picks an explicit server URL first, then local vLLM replicas when vLLM and a
GPU are present; with neither, there is no model and callers fall back to the model-free
(proprioception) annotator. The scripted test double is never picked here.
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import shutil
from collections.abc import AsyncIterator
from typing import Literal

from steerable.errors import ConfigError, VLMError
from steerable.vlm.config import VLMConfig
from steerable.vlm.launcher import VLLMLauncher, detect_gpus, replica_urls
from steerable.vlm.protocol import VLMClient

__all__ = ["NO_MODEL_MESSAGE", "make_vlm", "open_vlm", "resolve_backend", "vllm_available"]

log = logging.getLogger(__name__)

ResolvedBackend = Literal["openai", "vllm", "transformers"]

NO_MODEL_MESSAGE = (
    "no VLM is configured: pass --vlm.base_url with an OpenAI-compatible server (and --vlm.model_id), "
    "or install vLLM on a GPU machine; without a model the proprioception annotator is used"
)


def vllm_available() -> bool:
    """Whether a `vllm` command or package is installed here."""
    return shutil.which("vllm") is not None or importlib.util.find_spec("vllm") is not None


def resolve_backend(config: VLMConfig) -> ResolvedBackend | None:
    """The backend `config` selects; for `auto`, None means no model is available."""
    if config.backend != "auto":
        return config.backend
    if config.base_url:
        return "openai"
    if vllm_available() and detect_gpus() and config.model_id:
        return "vllm"
    return None


def make_vlm(config: VLMConfig) -> VLMClient:
    """A client for the configured backend (nothing is started: see `open_vlm` for vLLM replicas).

    Raises:
        VLMError: `auto` found no model to use (message: NO_MODEL_MESSAGE).
        ConfigError: the chosen backend lacks a required setting.
        MissingExtraError: the backend's optional package is not installed.
    """
    backend = resolve_backend(config)
    if backend is None:
        if vllm_available() and detect_gpus():
            raise VLMError("vLLM and a GPU are available: pass --vlm.model_id to serve a model with them")
        raise VLMError(NO_MODEL_MESSAGE)
    if backend == "openai":
        from steerable.vlm.openai_http import OpenAIHTTPVLM

        return OpenAIHTTPVLM(config)
    if not config.model_id:
        raise ConfigError(f"--vlm.backend {backend} needs --vlm.model_id (a Hugging Face id or local path)")
    if backend == "vllm":
        from steerable.vlm.openai_http import OpenAIHTTPVLM

        return OpenAIHTTPVLM(config, urls=replica_urls(config))
    from steerable.vlm.transformers_local import TransformersVLM

    return TransformersVLM(config)


@contextlib.asynccontextmanager
async def open_vlm(config: VLMConfig) -> AsyncIterator[VLMClient]:
    """The configured client, checked and ready; launches and stops vLLM replicas for that backend."""
    backend = resolve_backend(config)
    async with contextlib.AsyncExitStack() as stack:
        if backend == "vllm":
            await stack.enter_async_context(VLLMLauncher(config))
        vlm = make_vlm(config)
        stack.push_async_callback(vlm.aclose)
        await vlm.check()
        log.info("VLM ready: backend=%s model=%s", backend, config.model_id)
        yield vlm
