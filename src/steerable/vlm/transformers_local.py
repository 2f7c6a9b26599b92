"""In-process VLM backend on Hugging Face transformers: a chat template with real image inputs.

For a single GPU or CPU without a server. Images go through the processor's chat template (the
reference backend applied the template to text only and silently dropped them). Calls run one at a
time on the client's own worker thread (one long-lived thread, so torch keeps one intra-op thread
team instead of one per asyncio loop's default executor) and every generation is bounded in tokens
and in time (`request_timeout_s`); for throughput, serve the model with vLLM.
Decoding is not schema-constrained unless a `logits_processor_factory` (e.g. from a grammar
library) is given, so replies rely on the schema in the prompt and the shared retry loop.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from importlib import import_module
from typing import Any, TypeVar

from steerable.errors import MissingExtraError, VLMError
from steerable.vlm.backends import VLMBackend
from steerable.vlm.config import VLMConfig
from steerable.vlm.images import fit_image, map_image_blocks
from steerable.vlm.protocol import Message, VLMStats
from steerable.vlm.retry import Reply, generate_with_retries, with_schema_instruction

__all__ = ["BACKEND", "LogitsProcessorFactory", "TransformersVLM"]

log = logging.getLogger(__name__)

# (schema, tokenizer) -> a transformers LogitsProcessor constraining one generation to the schema.
LogitsProcessorFactory = Callable[[dict[str, Any], Any], Any]
_T = TypeVar("_T")


class TransformersVLM:
    """`VLMClient` running an image-text-to-text model in this process."""

    def __init__(
        self,
        config: VLMConfig,
        *,
        model: Any = None,
        processor: Any = None,
        logits_processor_factory: LogitsProcessorFactory | None = None,
    ) -> None:
        """Load `config.model_id` on first use, or use the given (already loaded) model and processor."""
        self.config = config
        self._model = model
        self._processor = processor
        self._factory = logits_processor_factory
        self._stats = VLMStats()
        self._lock = asyncio.Lock()  # one generate() at a time: the model is not re-entrant
        self._worker: ThreadPoolExecutor | None = None

    @property
    def model_id(self) -> str | None:
        """The Hugging Face model id loaded in process."""
        return self.config.model_id

    @property
    def stats(self) -> VLMStats:
        """Counters, as for the HTTP backend (request_bytes stays 0)."""
        return self._stats

    async def check(self) -> None:
        """Load the model now, so a bad model id fails before any episode starts."""
        await self._ensure_loaded()

    async def _ensure_loaded(self) -> None:
        if self._model is not None and self._processor is not None:
            return
        async with self._lock:
            if self._model is None or self._processor is None:
                self._model, self._processor = await self._on_worker(_load, self.config.model_id or "")

    async def _on_worker(self, fn: Callable[..., _T], *args: Any) -> _T:
        """Run `fn(*args)` on this client's single worker thread (created on first use)."""
        if self._worker is None:
            self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="steerable-transformers")
        return await asyncio.get_running_loop().run_in_executor(self._worker, fn, *args)

    async def generate_json(
        self,
        messages: list[Message],
        schema: dict[str, Any],
        *,
        affinity: str | None = None,
        purpose: str = "",
    ) -> Any:
        """The reply as JSON valid against `schema`; `affinity` is irrelevant with one local model."""
        await self._ensure_loaded()
        hf_messages = _to_hf_messages(messages, self.config.image_max_side)

        async def send(conversation: list[Message]) -> Reply:
            async with self._lock:
                self._stats.in_flight += 1
                self._stats.max_in_flight = max(self._stats.max_in_flight, self._stats.in_flight)
                try:
                    return await self._on_worker(self._generate, conversation, schema)
                finally:
                    self._stats.in_flight -= 1

        return await generate_with_retries(
            send,
            hf_messages,
            schema,
            max_retries=self.config.max_retries,
            backoff_base_s=self.config.backoff_base_s,
            stats=self._stats,
            purpose=purpose,
        )

    def _generate(self, conversation: list[Message], schema: dict[str, Any]) -> Reply:
        import torch
        from transformers import LogitsProcessorList

        inputs = self._processor.apply_chat_template(
            with_schema_instruction(conversation, schema),
            add_generation_prompt=True,
            tokenize=True,
            return_dict=True,
            return_tensors="pt",
            **(self.config.chat_template_kwargs or {}),
        ).to(self._model.device)
        # Bounded twice: a token budget, and wall time (a slow or stuck generation ends as a cut reply).
        options: dict[str, Any] = {"max_new_tokens": self.config.max_new_tokens,
                                   "max_time": self.config.request_timeout_s}
        if self.config.temperature > 0:
            options.update(do_sample=True, temperature=self.config.temperature)
        else:
            options["do_sample"] = False
        tokenizer = getattr(self._processor, "tokenizer", self._processor)
        if self._factory is not None:
            options["logits_processor"] = LogitsProcessorList([self._factory(schema, tokenizer)])
        started = time.monotonic()
        with torch.inference_mode():
            output = self._model.generate(**inputs, **options)
        timed_out = time.monotonic() - started >= self.config.request_timeout_s
        prompt_len = inputs["input_ids"].shape[1]
        new_tokens = output[0, prompt_len:]
        self._stats.prompt_tokens += int(prompt_len)
        self._stats.completion_tokens += len(new_tokens)
        text = tokenizer.decode(new_tokens, skip_special_tokens=True)
        finish = "length" if timed_out or len(new_tokens) >= self.config.max_new_tokens else "stop"
        if timed_out:
            log.warning("generation stopped after %.0f s (--vlm.request_timeout_s)", self.config.request_timeout_s)
        return Reply(text, finish)

    async def aclose(self) -> None:
        """Drop the model so its memory can be freed, and stop the worker thread."""
        self._model = None
        self._processor = None
        if self._worker is not None:
            self._worker.shutdown(wait=False, cancel_futures=True)
            self._worker = None


def _load(model_id: str) -> tuple[Any, Any]:
    try:
        import torch
        # As a plain module: transformers' `from_pretrained` is untyped, and loaded models mistype `.to()`.
        transformers: Any = import_module("transformers")
    except ImportError as exc:
        raise MissingExtraError("transformers", "train") from exc
    try:
        processor = transformers.AutoProcessor.from_pretrained(model_id)
        model = transformers.AutoModelForImageTextToText.from_pretrained(model_id, dtype="auto")
    except (OSError, ValueError) as exc:
        raise VLMError(
            f"cannot load {model_id!r} with transformers ({exc}); pass a Hugging Face model id or a local folder "
            "with --vlm.model_id"
        ) from exc
    device = "cuda" if torch.cuda.is_available() else "cpu"
    log.info("loaded %s on %s", model_id, device)
    return model.to(device).eval(), processor


def _to_hf_messages(messages: list[Message], max_side: int) -> list[Message]:
    """HF chat-template messages: images as downscaled PIL images, frame lists as one image each."""
    return map_image_blocks(
        messages,
        lambda img: {"type": "image", "image": fit_image(img, max_side)},
        lambda block: {"type": "image", "url": block["image_url"]["url"]},
    )


# `--vlm.backend transformers` (never picked by `auto`: loading a model here is asked for by name).
BACKEND = VLMBackend(client=TransformersVLM, needs_model_id=True)
