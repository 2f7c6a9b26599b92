"""Replies as pydantic models: the schema the model is sent is generated from the model it is read into.

    class TaskReply(BaseModel):
        task: str

    reply = await ask(vlm, messages, TaskReply, purpose="plan.task")
    reply.task

One definition serves both ends, so what the server is constrained to and what the caller reads
cannot drift apart.
"""

from __future__ import annotations

import functools
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from steerable.errors import VLMReplyError
from steerable.settings import error_text
from steerable.vlm.protocol import Message, VLMClient

__all__ = ["ask", "reply_schema"]

M = TypeVar("M", bound=BaseModel)


@functools.cache
def _schema(model: type[BaseModel]) -> dict[str, Any]:
    return model.model_json_schema()


def reply_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The JSON schema sent for `model` (a copy: callers may not edit the cached one)."""
    return dict(_schema(model))


async def ask(
    vlm: VLMClient, messages: list[Message], model: type[M], *, affinity: str | None = None, purpose: str = ""
) -> M:
    """The reply to `messages`, constrained by `model`'s schema and returned as a `model`.

    Raises:
        VLMReplyError: no reply valid against the schema after the client's retries, or one the
            model still refuses (a constraint JSON schema cannot express).
    """
    data = await vlm.generate_json(messages, reply_schema(model), affinity=affinity, purpose=purpose)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "reply"
        raise VLMReplyError(
            f"{purpose or 'reply'}: {where}: {error_text(first)}", reason="schema", purpose=purpose
        ) from exc
