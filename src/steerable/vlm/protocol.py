"""The one async VLM client contract every backend implements, and its running counters.

Callers (annotation modules, the runtime planner) depend only on `VLMClient`; backends differ in
transport, never in how replies are parsed, validated and retried (see `steerable.vlm.retry`).
"""

from __future__ import annotations

import time
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
    # Per server URL (HTTP backends): requests on the wire now, and since when (time.monotonic) it has
    # said nothing: the first request sent after its last reply. A reply clears it.
    waiting: dict[str, int] = field(default_factory=dict)
    silent_since: dict[str, float] = field(default_factory=dict)

    def note_reason(self, kind: str) -> None:
        """Count one retry or failure cause (e.g. 'timeout', 'invalid_json', 'schema')."""
        self.reasons[kind] = self.reasons.get(kind, 0) + 1

    def request_sent(self, url: str) -> None:
        self.waiting[url] = self.waiting.get(url, 0) + 1
        self.silent_since.setdefault(url, time.monotonic())

    def reply_received(self, url: str) -> None:
        """Any answer (an HTTP error too: the server is alive). Requests still on the wire wait from now."""
        if self.waiting.get(url, 0) > 1:
            self.silent_since[url] = time.monotonic()
        else:
            self.silent_since.pop(url, None)

    def request_ended(self, url: str) -> None:
        self.waiting[url] = max(0, self.waiting.get(url, 0) - 1)

    def silent_for(self, url: str) -> float:
        """Seconds since `url` last answered while asked (0 when it has answered every request)."""
        since = self.silent_since.get(url)
        return 0.0 if since is None else time.monotonic() - since

    def no_reply(self) -> dict[str, float]:
        """URL -> seconds without a reply, for each server that requests are waiting on now."""
        return {url: self.silent_for(url) for url, n in self.waiting.items() if n > 0 and url in self.silent_since}

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
            "no_reply_s": {url: round(s, 1) for url, s in self.no_reply().items()},
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
