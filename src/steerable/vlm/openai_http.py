"""VLM backend for any OpenAI-compatible server (vLLM, SGLang, Ollama, hosted APIs), over HTTP.

This module is the one gateway between steerable and such servers: it maps every SDK failure to a
retryable `AttemptError` or a typed `VLMError` whose message says what to do. Requests ask for
schema-constrained decoding (`response_format` json_schema); a server that refuses it is asked
again with the schema in the prompt, and remembered as prompt-only.

A server that takes connections but stops answering (a stuck engine) is given up for the rest of the
run once it has said nothing for twice `request_timeout_s` and let several requests time out: every
call to it then fails at once with the reason, instead of each call spending all its attempts on it.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from steerable.errors import ConfigError, VLMError, VLMReplyError, VLMUnavailableError
from steerable.vlm.backends import VLMBackend
from steerable.vlm.chat_wire import chat_body, encode, parse_completion, server_message
from steerable.vlm.config import VLMConfig
from steerable.vlm.endpoints import Endpoint, EndpointPool
from steerable.vlm.limiter import PriorityLimiter
from steerable.vlm.protocol import Message, VLMStats
from steerable.vlm.retry import AttemptError, Reply, generate_with_retries, with_schema_instruction

__all__ = ["BACKEND", "OpenAIHTTPVLM"]

log = logging.getLogger(__name__)

_CHECK_TIMEOUT_S = 10.0
# A server is given up when it has answered nothing for this many request timeouts, during which at
# least _TIMEOUTS_BEFORE_GIVING_UP requests to it timed out (one slow request is not a stuck server).
_SILENT_TIMEOUTS = 2
_TIMEOUTS_BEFORE_GIVING_UP = 3
_SILENT: list[str] = ["<listening but silent>"]  # a sentinel, compared by identity


class _Rejected(Exception):
    """The server refused the request itself (HTTP 400/422), e.g. an unsupported response_format."""


class OpenAIHTTPVLM:
    """`VLMClient` over one or more OpenAI-compatible endpoints, with one global in-flight limit."""

    def __init__(self, config: VLMConfig, *, urls: list[str] | None = None) -> None:
        import openai  # a core dependency, imported here because it is slow to import

        self._openai = openai
        self._response_cls = _httpx_response_class()
        self.config = config
        urls = urls if urls is not None else config.base_url
        if not urls:
            raise ConfigError(
                "--vlm.base_url is required for the openai backend (e.g. http://localhost:8000/v1)"
            )
        self._model = config.model_id
        self._stats = VLMStats()
        self._limit = PriorityLimiter(config.client_concurrency)
        self._check_lock = asyncio.Lock()
        self._structured: dict[str, bool] = {}  # url -> False once it refused response_format
        # At most one connection per request we allow in flight (per endpoint): the pool scans its
        # connections on every request, so an oversized pool costs CPU at high call rates.
        slots = config.client_concurrency
        http = openai.DefaultAsyncHttpxClient(
            event_hooks={"request": [self._count_request]},
            limits=_httpx_limits(max_connections=slots * max(1, len(config.base_url)), keepalive=slots),
        )
        self._http = http
        self.pool: EndpointPool[Any] = EndpointPool(
            [
                Endpoint(
                    url,
                    openai.AsyncOpenAI(
                        base_url=url,
                        api_key=config.resolved_api_key(),
                        max_retries=0,  # retries are ours: schema-aware, with feedback and failover
                        timeout=config.request_timeout_s,
                        http_client=http,
                    ),
                )
                for url in urls
            ]
        )

    @property
    def stats(self) -> VLMStats:
        """Live counters (calls, retries, tokens, bytes...)."""
        return self._stats

    @property
    def model_id(self) -> str | None:
        """The served model name in use (resolved by `check` when the config leaves it unset)."""
        return self._model

    async def _count_request(self, request: Any) -> None:
        self._stats.request_bytes += int(request.headers.get("content-length", 0))

    async def check(self) -> None:
        """Verify at least one endpoint answers and every answering one serves the model."""
        unreachable: list[str] = []
        silent: list[str] = []  # accepted the connection, then said nothing in time
        for endpoint in self.pool.endpoints:
            served = await self._served_models(endpoint)
            if served is None or served is _SILENT:
                (unreachable if served is None else silent).append(endpoint.url)
                self.pool.mark_failed(endpoint, hard=True)
                continue
            if not served:
                continue  # the server has no model list; the first call will tell
            if self._model is None:
                if len(served) != 1:
                    raise VLMError(
                        f"the VLM server at {endpoint.url} serves {served}; choose one with --vlm.model_id"
                    )
                self._model = served[0]
                log.info("using model %r, the only one served at %s", self._model, endpoint.url)
            elif self._model not in served:
                raise VLMError(
                    f"model {self._model!r} is not served at {endpoint.url}; it serves: {served}; "
                    "fix --vlm.model_id"
                )
        if silent and len(unreachable) + len(silent) == len(self.pool.endpoints):
            raise VLMUnavailableError(
                f"the VLM server at {', '.join(silent)} accepted the connection but did not answer within "
                f"{self._check_timeout_s:g}s (still loading the model, or stuck?); wait for it, restart it, "
                "or raise --vlm.request_timeout_s"
            )
        if len(unreachable) == len(self.pool.endpoints):
            raise VLMUnavailableError(
                f"cannot reach the VLM server at {', '.join(unreachable)}; start it or pass --vlm.base_url"
            )
        for url in unreachable + silent:
            log.warning("VLM server %s does not answer; using the others until it does", url)

    @property
    def _check_timeout_s(self) -> float:
        return min(self.config.request_timeout_s, _CHECK_TIMEOUT_S)

    async def _served_models(self, endpoint: Endpoint[Any]) -> list[str] | None:
        """Model ids the endpoint lists; [] if it has no model list; None if it cannot be reached;
        `_SILENT` if it took the connection but did not answer in time."""
        openai = self._openai
        try:
            page = await endpoint.client.models.list(timeout=self._check_timeout_s)
        except openai.APITimeoutError:  # a subclass of APIConnectionError: test it first
            return _SILENT
        except openai.APIConnectionError:
            return None
        except (openai.AuthenticationError, openai.PermissionDeniedError) as exc:
            raise VLMError(
                f"the VLM server at {endpoint.url} refused the API key (HTTP {exc.status_code}); "
                "set OPENAI_API_KEY or --vlm.api_key"
            ) from exc
        except openai.APIStatusError as exc:
            log.debug("%s has no usable model list (HTTP %s)", endpoint.url, exc.status_code)
            return []
        return [model.id for model in page.data]

    async def generate_json(
        self,
        messages: list[Message],
        schema: dict[str, Any],
        *,
        affinity: str | None = None,
        purpose: str = "",
    ) -> Any:
        """The reply to `messages` as JSON valid against `schema` (see `VLMClient`)."""
        if self._model is None:
            async with self._check_lock:  # concurrent first calls share one model lookup
                if self._model is None:
                    await self.check()
        wire = await encode(messages, self.config)

        async def send(conversation: list[Message]) -> Reply:
            return await self._send_with_failover(conversation, schema, affinity, purpose)

        return await generate_with_retries(
            send,
            wire,
            schema,
            max_retries=self.config.max_retries,
            backoff_base_s=self.config.backoff_base_s,
            stats=self._stats,
            purpose=purpose,
        )

    async def _send_with_failover(
        self, conversation: list[Message], schema: dict[str, Any], affinity: str | None, purpose: str
    ) -> Reply:
        """One attempt; a refused connection moves on to the next endpoint instead of using up a retry."""
        tried: list[Endpoint[Any]] = []
        while True:
            endpoint = self.pool.pick(affinity, exclude=tried)
            if endpoint is None:
                given_up = [e.given_up for e in self.pool.endpoints if e.given_up is not None]
                if len(given_up) == len(self.pool.endpoints):  # no retry can help: fail the call now
                    self._stats.note_reason("no_reply")
                    raise VLMUnavailableError("; ".join(given_up))
                urls = ", ".join(e.url for e in tried)
                raise AttemptError(
                    f"cannot reach the VLM server at {urls}; start it or pass --vlm.base_url", "connection"
                )
            tried.append(endpoint)
            try:
                reply = await self._request(endpoint, conversation, schema, purpose)
            except AttemptError as exc:
                self.pool.mark_failed(endpoint, hard=exc.kind == "connection")
                if exc.kind in ("connection", "no_reply"):
                    continue
                raise
            self.pool.mark_ok(endpoint)
            return reply

    async def _request(
        self, endpoint: Endpoint[Any], conversation: list[Message], schema: dict[str, Any], purpose: str
    ) -> Reply:
        mode = self.config.structured_output
        structured = mode == "json_schema" or (mode == "auto" and self._structured.get(endpoint.url, True))
        if not structured:
            try:
                return await self._post(
                    endpoint, with_schema_instruction(conversation, schema), None, purpose
                )
            except _Rejected as exc:
                raise _rejected_error(endpoint, exc, purpose) from exc
        try:
            return await self._post(endpoint, conversation, schema, purpose)
        except _Rejected as exc:
            if mode != "auto":
                raise _rejected_error(endpoint, exc, purpose) from exc
            first = exc
        # Retry prompt-only; only a success proves response_format was the problem (a 400 can
        # also mean e.g. a prompt longer than the context).
        try:
            reply = await self._post(endpoint, with_schema_instruction(conversation, schema), None, purpose)
        except _Rejected as exc:
            raise _rejected_error(endpoint, first, purpose) from exc
        if self._structured.get(endpoint.url, True):
            log.warning(
                "%s refused response_format (%s); asking it for JSON in the prompt instead",
                endpoint.url,
                first,
            )
        self._structured[endpoint.url] = False
        return reply

    async def _post(
        self, endpoint: Endpoint[Any], messages: list[Message], schema: dict[str, Any] | None, purpose: str
    ) -> Reply:
        """One HTTP request under the global in-flight limit, SDK errors mapped to ours."""
        openai = self._openai
        body = chat_body(self._model, messages, schema, purpose, self.config)
        url = endpoint.url
        async with self._limit:
            if endpoint.given_up is not None:  # it stopped answering while this call waited for a slot
                raise AttemptError(endpoint.given_up, "no_reply")
            self._stats.in_flight += 1
            self._stats.max_in_flight = max(self._stats.max_in_flight, self._stats.in_flight)
            endpoint.in_flight += 1
            try:
                response = await self._exchange(endpoint, body)
            except openai.APIConnectionError as exc:
                raise AttemptError(
                    f"cannot reach the VLM server at {url}: {exc.__cause__ or exc}; start it or pass --vlm.base_url",
                    "connection",
                ) from exc
            except (openai.AuthenticationError, openai.PermissionDeniedError) as exc:
                raise VLMError(
                    f"the VLM server at {url} refused the API key (HTTP {exc.status_code}); "
                    "set OPENAI_API_KEY or --vlm.api_key"
                ) from exc
            except openai.NotFoundError as exc:
                raise VLMError(
                    f"model {self._model!r} is not served at {url} (HTTP 404: {server_message(exc)}); "
                    "fix --vlm.model_id"
                ) from exc
            except (openai.BadRequestError, openai.UnprocessableEntityError) as exc:
                raise _Rejected(f"HTTP {exc.status_code}: {server_message(exc)}") from exc
            except openai.RateLimitError as exc:
                raise AttemptError(f"{url} is rate limiting (HTTP 429)", "rate_limit") from exc
            except openai.APIStatusError as exc:
                raise AttemptError(
                    f"server error from {url} (HTTP {exc.status_code}: {server_message(exc)})",
                    "server_error",
                ) from exc
            finally:
                endpoint.in_flight -= 1
                self._stats.in_flight -= 1
        try:
            return parse_completion(response.json(), self._stats)
        except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
            raise AttemptError(f"malformed chat completion from {url}: {exc!r}", "server_error") from exc

    async def _exchange(self, endpoint: Endpoint[Any], body: dict[str, Any]) -> Any:
        """One request on the wire, noting whether the server answered: any reply, an HTTP error
        too, shows it alive; a timeout may show it stuck (then it is given up)."""
        openai = self._openai
        answered = False
        self._stats.request_sent(endpoint.url)
        try:
            # The SDK's raw `post` (its documented escape hatch) skips the typed request
            # transform and response models, which cost more CPU than the HTTP exchange itself.
            response = await endpoint.client.post("/chat/completions", cast_to=self._response_cls, body=body)
            answered = True
            return response
        except openai.APIStatusError:
            answered = True
            raise
        except openai.APITimeoutError as exc:
            raise self._timed_out(endpoint) from exc
        finally:
            self._stats.request_ended(endpoint.url)
            if answered:
                self._stats.reply_received(endpoint.url)
                endpoint.timeouts = 0

    def _timed_out(self, endpoint: Endpoint[Any]) -> AttemptError:
        """The error of a request that got no reply in time; gives the server up when it has been
        silent for long (see the module's docstring)."""
        timeout = self.config.request_timeout_s
        endpoint.timeouts += 1
        silent = self._stats.silent_for(endpoint.url)
        if (
            endpoint.given_up is None
            and endpoint.timeouts >= _TIMEOUTS_BEFORE_GIVING_UP
            and silent >= _SILENT_TIMEOUTS * timeout
        ):
            endpoint.given_up = (
                f"no reply from {endpoint.url} for {silent:.0f} s ({endpoint.timeouts} requests timed out "
                f"after {timeout:g} s each): the server takes connections but does not answer; check or "
                "restart it, or raise --vlm.request_timeout_s if it is only slow"
            )
            log.warning("%s; not asking it again in this run", endpoint.given_up)
        if endpoint.given_up is not None:
            return AttemptError(endpoint.given_up, "no_reply")
        return AttemptError(f"no reply from {endpoint.url} within {timeout:g}s", "timeout")

    async def aclose(self) -> None:
        """Close the HTTP connections."""
        await self._http.aclose()


def _httpx() -> Any:
    """The HTTP library this openai version is built on (httpx2, or httpx before it)."""
    try:
        import httpx2

        return httpx2
    except ImportError:
        import httpx

        return httpx


def _httpx_response_class() -> type:
    response: type = _httpx().Response
    return response


def _httpx_limits(*, max_connections: int, keepalive: int) -> Any:
    return _httpx().Limits(
        max_connections=max_connections, max_keepalive_connections=keepalive, keepalive_expiry=30.0
    )


def _rejected_error(endpoint: Endpoint[Any], exc: _Rejected, purpose: str) -> VLMReplyError:
    reason = f"the VLM server at {endpoint.url} rejected the request ({exc})"
    return VLMReplyError(reason, reason=reason, purpose=purpose)


def _has_url(config: VLMConfig) -> bool:
    return bool(config.base_url)


# `--vlm.backend openai`, and `auto`'s first choice when a URL is given.
BACKEND = VLMBackend(client=OpenAIHTTPVLM, picks=_has_url)
