"""The one async VLM client contract every backend implements, and its running counters.

Callers (annotation modules, the runtime planner) depend only on `VLMClient`; backends differ in
transport, never in how replies are parsed, validated and retried (see `steerable.vlm.retry`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

__all__ = ["Message", "VLMClient", "VLMStats"]

# OpenAI/HF-style chat message: {"role": ..., "content": str | [blocks]}. Image blocks may be
# {"type": "image", "image": PIL.Image | np.ndarray}; backends encode them as they need.
Message = dict[str, Any]


@dataclass
class VLMStats:
    """Counters a progress display reads while a run goes on (all cumulative except `in_flight`)."""

    calls: int = 0  # generate_json calls finished (successfully or not)
    succeeded: int = 0
    failures: int = 0  # calls that raised after their retries
    retries: int = 0  # extra attempts, for any reason
    in_flight: int = 0  # requests on the wire right now
    max_in_flight: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    request_bytes: int = 0  # HTTP request bodies sent, retries included
    reasons: dict[str, int] = field(default_factory=dict)  # retry/failure reason kind -> count

    def note_reason(self, kind: str) -> None:
        """Count one retry or failure cause (e.g. 'timeout', 'invalid_json', 'schema')."""
        self.reasons[kind] = self.reasons.get(kind, 0) + 1

    def snapshot(self) -> dict[str, Any]:
        """A plain dict copy, for JSON run summaries."""
        return {
            "calls": self.calls,
            "succeeded": self.succeeded,
            "failures": self.failures,
            "retries": self.retries,
            "in_flight": self.in_flight,
            "max_in_flight": self.max_in_flight,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "request_bytes": self.request_bytes,
            "reasons": dict(self.reasons),
        }


@runtime_checkable
class VLMClient(Protocol):
    """An async vision-language model that answers chat messages with JSON matching a schema."""

    @property
    def stats(self) -> VLMStats:
        """Live counters for progress displays and run summaries."""
        ...

    @property
    def model_id(self) -> str | None:
        """The model that answers (recorded as the producer of what it wrote); None when unknown."""
        ...

    async def generate_json(
        self,
        messages: list[Message],
        schema: dict[str, Any],
        *,
        affinity: str | None = None,
        purpose: str = "",
    ) -> Any:
        """The parsed reply, valid against `schema`.

        `affinity` groups calls that share a prefix (e.g. one episode) so they reach the same server;
        `purpose` names the prompt in logs and errors.

        Raises:
            VLMReplyError: no valid reply after the retries (the reason is in the message).
            VLMUnavailableError: no endpoint answers.
            VLMError: a fault no retry can fix (wrong model id, refused API key).
        """
        ...

    async def check(self) -> None:
        """Verify the backend is reachable and serves the configured model; raise VLMError otherwise."""
        ...

    async def aclose(self) -> None:
        """Release connections, threads or models held by the client."""
        ...
