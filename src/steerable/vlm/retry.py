"""The one retry loop every backend shares: parse, validate against the schema, feed errors back, back off.

Backends only supply `send(messages) -> Reply` and raise `AttemptError` for failures worth retrying;
how replies are judged, what the model is told after a bad reply, and when to give up live here once.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import jsonschema
from jsonschema.exceptions import SchemaError, best_match
from jsonschema.protocols import Validator

from steerable.errors import VLMError, VLMReplyError, VLMUnavailableError
from steerable.vlm.jsonrepair import ReplyParseError, extract_json
from steerable.vlm.protocol import Message, VLMStats

__all__ = [
    "AttemptError",
    "Reply",
    "backoff_delay",
    "generate_with_retries",
    "schema_error",
    "with_schema_instruction",
]

log = logging.getLogger(__name__)

_MAX_BACKOFF_S = 30.0
_FED_BACK_CHARS = 4000  # a runaway reply fed back whole would crowd out the prompt


@dataclass(frozen=True)
class Reply:
    """One raw model answer; `finish_reason` 'length' means the token budget cut it."""

    text: str
    finish_reason: str | None = None


class AttemptError(VLMError):
    """One attempt failed in transport (timeout, 5xx, refused connection); `kind` names the cause."""

    def __init__(self, message: str, kind: str) -> None:
        super().__init__(message)
        self.kind = kind


def backoff_delay(failures: int, base_s: float) -> float:
    """Exponential backoff with jitter, so retries of many calls don't hit a recovering server at once."""
    return min(_MAX_BACKOFF_S, base_s * 2.0**failures) * random.uniform(0.5, 1.0)


@functools.lru_cache(maxsize=256)
def _validator(schema_json: str) -> Validator:
    schema = json.loads(schema_json)
    cls = jsonschema.validators.validator_for(schema)
    try:
        cls.check_schema(schema)
    except SchemaError as exc:
        raise VLMError(f"the JSON schema given to the VLM is invalid: {exc.message}") from exc
    validator: Validator = cls(schema)
    return validator


def _compiled(schema: dict[str, Any]) -> Validator:
    return _validator(json.dumps(schema, sort_keys=True))


def schema_error(value: Any, schema: dict[str, Any]) -> str | None:
    """Why `value` breaks `schema` (one line, with the JSON path), or None when it is valid."""
    error = best_match(_compiled(schema).iter_errors(value))
    if error is None:
        return None
    path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
    return f"${path}: {error.message}"


def with_schema_instruction(messages: list[Message], schema: dict[str, Any]) -> list[Message]:
    """Messages with the schema spelled out at the end, for servers that cannot constrain decoding."""
    note = (
        "Answer with only one JSON value, no prose and no code fences. "
        "It must match this JSON schema:\n" + json.dumps(schema, separators=(",", ":"))
    )
    if messages and messages[-1].get("role") == "user":
        last = messages[-1]
        content = last.get("content")
        if isinstance(content, list):
            new_content: Any = [*content, {"type": "text", "text": note}]
        else:
            new_content = f"{content}\n\n{note}" if content else note
        return [*messages[:-1], {**last, "content": new_content}]
    return [*messages, {"role": "user", "content": note}]


def _feedback(messages: list[Message], bad_reply: str, reason: str) -> list[Message]:
    """The original messages plus the rejected reply and what was wrong with it (only the latest)."""
    shown = bad_reply if len(bad_reply) <= _FED_BACK_CHARS else bad_reply[:_FED_BACK_CHARS] + "..."
    return [
        *messages,
        {"role": "assistant", "content": shown},
        {
            "role": "user",
            "content": f"That reply could not be used: {reason}. "
            "Reply again with only the corrected JSON value, matching the required schema exactly.",
        },
    ]


async def generate_with_retries(
    send: Callable[[list[Message]], Awaitable[Reply]],
    messages: list[Message],
    schema: dict[str, Any],
    *,
    max_retries: int,
    backoff_base_s: float,
    stats: VLMStats,
    purpose: str = "",
) -> Any:
    """Call `send` until a reply parses and validates, at most `max_retries` extra times."""
    _compiled(schema)  # an invalid schema is a caller bug: fail now, not after every retry
    conversation = messages
    reason, kind = "no attempt was made", "none"
    transport_failures = 0
    try:
        for attempt in range(max_retries + 1):
            if attempt:
                stats.retries += 1
            try:
                reply = await send(conversation)
            except AttemptError as exc:
                reason, kind = str(exc), exc.kind
                stats.note_reason(kind)
                log.debug("VLM call %r attempt %d: %s", purpose, attempt + 1, reason)
                if attempt < max_retries:
                    await asyncio.sleep(backoff_delay(transport_failures, backoff_base_s))
                transport_failures += 1
                continue
            try:
                value = extract_json(reply.text)
            except ReplyParseError as exc:
                reason, kind = str(exc), exc.kind
                if reply.finish_reason == "length":
                    reason += " (it hit the max_new_tokens limit; raise --vlm.max_new_tokens)"
            else:
                problem = schema_error(value, schema)
                if problem is None:
                    stats.succeeded += 1
                    return value
                reason, kind = f"the reply does not match the schema at {problem}", "schema"
            stats.note_reason(kind)
            log.debug("VLM call %r attempt %d: %s", purpose, attempt + 1, reason)
            conversation = _feedback(messages, reply.text, reason)
    except VLMError:
        stats.failures += 1
        raise
    finally:
        stats.calls += 1
    stats.failures += 1
    label = f" {purpose!r}" if purpose else ""
    if kind == "connection":
        raise VLMUnavailableError(reason)
    raise VLMReplyError(
        f"VLM call{label} failed after {max_retries + 1} attempts: {reason}", reason=reason, purpose=purpose
    )
