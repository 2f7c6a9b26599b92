"""`ScriptedVLM`: a TEST DOUBLE that answers from a Python function instead of a model.

It exists so tests and the offline demo can drive code that needs a `VLMClient`. Its replies are
whatever the responder computes, never model output, and it is never chosen by `make_vlm`.
Replies still go through the same parsing, schema validation and retry loop as real backends, so
a responder can exercise the repair and retry paths.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from steerable.vlm.protocol import Message, VLMStats
from steerable.vlm.retry import Reply, generate_with_retries

__all__ = ["ScriptedCall", "ScriptedVLM"]

# (messages, schema, purpose) -> reply. A str is parsed like a model's text (fences, prose...);
# any other value is used as the parsed JSON. May also return an awaitable of either.
ScriptedResponder = Callable[[list[Message], dict[str, Any], str], Any]


@dataclass(frozen=True)
class ScriptedCall:
    """One attempt the responder answered, for tests to inspect."""

    messages: list[Message]
    schema: dict[str, Any]
    purpose: str
    affinity: str | None


class ScriptedVLM:
    """A test double for `VLMClient`: replies come from `responder`, validated against the schema."""

    def __init__(
        self,
        responder: ScriptedResponder,
        *,
        max_retries: int = 2,
        record: bool = True,
        model_id: str = "scripted-test-double",
    ) -> None:
        self._responder = responder
        self._model_id = model_id  # what provenance records: never presented as a real model
        self._max_retries = max_retries
        self._stats = VLMStats()
        self._record = record  # off for long runs: recorded calls keep every image alive
        self.calls: list[ScriptedCall] = []

    @property
    def model_id(self) -> str:
        return self._model_id

    @property
    def stats(self) -> VLMStats:
        """Counters, as for real backends."""
        return self._stats

    async def generate_json(
        self,
        messages: list[Message],
        schema: dict[str, Any],
        *,
        affinity: str | None = None,
        purpose: str = "",
    ) -> Any:
        """The responder's reply, parsed and schema-checked, retried with feedback when invalid."""

        async def send(conversation: list[Message]) -> Reply:
            if self._record:
                self.calls.append(ScriptedCall(conversation, schema, purpose, affinity))
            self._stats.in_flight += 1
            self._stats.max_in_flight = max(self._stats.max_in_flight, self._stats.in_flight)
            try:
                value = self._responder(conversation, schema, purpose)
                if inspect.isawaitable(value):
                    value = await value
            finally:
                self._stats.in_flight -= 1
            return Reply(value if isinstance(value, str) else json.dumps(value))

        return await generate_with_retries(
            send,
            messages,
            schema,
            max_retries=self._max_retries,
            backoff_base_s=0.0,
            stats=self._stats,
            purpose=purpose,
        )

    async def check(self) -> None:
        """Nothing to reach: always ready."""

    async def aclose(self) -> None:
        """Nothing to release."""
