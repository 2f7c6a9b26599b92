"""The shapes of an OpenAI chat-completions exchange: the wire messages and request body sent, the
reply (text, finish reason, token counts) read back, and the server's message in an error body."""

from __future__ import annotations

import asyncio
import re
from typing import Any

from steerable.vlm.config import VLMConfig
from steerable.vlm.images import encode_messages
from steerable.vlm.protocol import Message, VLMStats
from steerable.vlm.retry import Reply

__all__ = ["chat_body", "encode", "parse_completion", "server_message"]


async def encode(messages: list[Message], config: VLMConfig) -> list[Message]:
    """Wire messages; JPEG encoding runs in a thread (PIL drops the GIL) to keep the event loop free."""
    has_images = any(
        isinstance(m.get("content"), list) and any(b.get("type") in ("image", "video") for b in m["content"])
        for m in messages
    )
    if not has_images:
        return messages
    return await asyncio.to_thread(
        encode_messages, messages, max_side=config.image_max_side, quality=config.jpeg_quality
    )


def chat_body(
    model: str | None, messages: list[Message], schema: dict[str, Any] | None, purpose: str, config: VLMConfig
) -> dict[str, Any]:
    """The request body; with `schema`, asking for schema-constrained decoding (`response_format`)."""
    body: dict[str, Any] = {
        "model": model,
        "messages": messages,
        "max_tokens": config.max_new_tokens,
        "temperature": config.temperature,
    }
    if schema is not None:
        name = re.sub(r"[^A-Za-z0-9_-]", "_", purpose)[:64] or "reply"
        body["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": name, "schema": schema},
        }
    if config.reasoning_effort:
        body["reasoning_effort"] = config.reasoning_effort
    if config.chat_template_kwargs:
        body["chat_template_kwargs"] = config.chat_template_kwargs
    return body


def parse_completion(data: dict[str, Any], stats: VLMStats) -> Reply:
    """The reply's text and finish reason, its token counts added to `stats`."""
    usage = data.get("usage") or {}
    stats.prompt_tokens += usage.get("prompt_tokens") or 0
    stats.completion_tokens += usage.get("completion_tokens") or 0
    choices = data.get("choices") or []
    if not choices:  # safety filters and exhausted thinking budgets reply with no choice
        return Reply("", None)
    choice = choices[0]
    return Reply((choice.get("message") or {}).get("content") or "", choice.get("finish_reason"))


def server_message(exc: Any) -> str:
    """The server's own message in an SDK error (its JSON body's `error.message`), at most 300 characters."""
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        message = inner.get("message") if isinstance(inner, dict) else inner
        if message:
            return str(message)[:300]
    return str(getattr(exc, "message", exc))[:300]
