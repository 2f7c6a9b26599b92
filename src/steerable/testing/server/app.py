"""`TestServer`: a local OpenAI-compatible chat server with set latency, capacity and faults.

A TEST TOOL, not a model: its replies are schema-valid placeholders (or what a responder returns).
It serves /v1/models, /v1/chat/completions (honouring `response_format` json_schema) and /health,
and counts what it sees so tests and benchmarks can check the client's behaviour from outside.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from steerable.testing.server.faults import FaultPlan
from steerable.testing.server.http import HTTPServer, Request, Response
from steerable.testing.server.instances import minimal_instance, schema_in_prompt, violating_instance

__all__ = ["Responder", "ServerStats", "TestServer"]

# (messages, schema or None) -> reply: a str is sent verbatim as the message content, anything
# else as its JSON text.
Responder = Callable[[list[dict[str, Any]], dict[str, Any] | None], Any]


@dataclass
class ServerStats:
    """What the server saw; read by tests and benchmarks (plain ints: safe to read from any thread)."""

    requests: int = 0
    chat_requests: int = 0
    completed: int = 0  # chat requests answered 200
    bytes_received: int = 0
    in_flight: int = 0  # chat requests received and not yet answered
    max_in_flight: int = 0
    max_serving: int = 0  # most requests inside the capacity limit at once
    response_format_requests: int = 0
    faults: dict[str, int] = field(default_factory=dict)
    models_asked: list[str] = field(default_factory=list)


class TestServer:
    """OpenAI-compatible server for tests and benchmarks; runs in a background thread or in a loop."""

    __test__ = False  # not a pytest test class, despite the name

    def __init__(
        self,
        *,
        latency_s: float = 0.0,
        capacity: int = 64,
        faults: FaultPlan | None = None,
        model_ids: Sequence[str] = ("test-model",),
        responder: Responder | None = None,
        structured_output: bool = True,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.latency_s = latency_s
        self.capacity = capacity
        self.faults = faults or FaultPlan()
        self.model_ids = list(model_ids)
        self.responder = responder
        self.structured_output = structured_output
        self.stats = ServerStats()
        self._http = HTTPServer(self._handle, host, port)
        self._slots: asyncio.Semaphore | None = None
        self._serving = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """Base URL for OpenAI clients, e.g. http://127.0.0.1:PORT/v1."""
        return f"http://{self._http.host}:{self._http.port}/v1"

    @property
    def port(self) -> int:
        """The bound port (after start)."""
        return self._http.port

    async def start_async(self) -> None:
        """Start serving on the running event loop."""
        self._slots = asyncio.Semaphore(self.capacity)
        await self._http.start()

    async def close_async(self) -> None:
        """Stop serving; open connections are dropped."""
        await self._http.close()

    def start(self) -> TestServer:
        """Serve from a background thread with its own event loop; returns self once listening."""
        ready = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                loop.run_until_complete(self.start_async())
            except BaseException as exc:  # reported to the starting thread below
                failure.append(exc)
                ready.set()
                return
            ready.set()
            loop.run_forever()
            loop.run_until_complete(self.close_async())
            loop.close()

        self._thread = threading.Thread(target=run, name="steerable-test-vlm-server", daemon=True)
        self._thread.start()
        ready.wait()
        if failure:
            raise failure[0]
        return self

    def stop(self) -> None:
        """Stop the background server (idempotent); afterwards connections are refused."""
        if self._loop is not None and self._thread is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)

    def __enter__(self) -> TestServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def _handle(self, request: Request) -> Response:
        self.stats.requests += 1
        self.stats.bytes_received += len(request.body)
        route = (request.method, request.path.rstrip("/"))
        if route == ("GET", "/health"):
            return Response(200, b"{}")
        if route == ("GET", "/v1/models"):
            data = [
                {"id": m, "object": "model", "created": 0, "owned_by": "steerable-test"}
                for m in self.model_ids
            ]
            return _json(200, {"object": "list", "data": data})
        if route == ("POST", "/v1/chat/completions"):
            return await self._chat(request)
        return _error(404, f"no route {request.method} {request.path}")

    async def _chat(self, request: Request) -> Response:
        self.stats.chat_requests += 1
        try:
            body = json.loads(request.body)
            messages = body["messages"]
        except (ValueError, KeyError, TypeError):
            return _error(400, "the body must be JSON with a 'messages' list")
        model = body.get("model")
        self.stats.models_asked.append(str(model))
        if model not in self.model_ids:
            return _error(404, f"The model `{model}` does not exist.")
        schema: dict[str, Any] | None = None
        response_format = body.get("response_format")
        if response_format is not None:
            if not self.structured_output:
                return _error(400, "response_format is not supported by this server")
            self.stats.response_format_requests += 1
            if response_format.get("type") == "json_schema":
                schema = response_format.get("json_schema", {}).get("schema", {})
            elif response_format.get("type") == "json_object":
                schema = {"type": "object"}
        fault = self.faults.next()
        if fault is not None:
            self.stats.faults[fault] = self.stats.faults.get(fault, 0) + 1
        self.stats.in_flight += 1
        self.stats.max_in_flight = max(self.stats.max_in_flight, self.stats.in_flight)
        try:
            if fault == "timeout":
                await asyncio.sleep(self.faults.timeout_s)
            assert self._slots is not None
            async with self._slots:
                self._serving += 1
                self.stats.max_serving = max(self.stats.max_serving, self._serving)
                try:
                    if self.latency_s > 0:
                        await asyncio.sleep(self.latency_s)
                finally:
                    self._serving -= 1
            if fault == "http_500":
                return _error(500, "injected server error")
            content, finish = self._content(messages, schema, fault)
        finally:
            self.stats.in_flight -= 1
        self.stats.completed += 1
        return _json(200, _completion(str(model), content, finish, len(request.body)))

    def _content(
        self, messages: list[dict[str, Any]], schema: dict[str, Any] | None, fault: str | None
    ) -> tuple[str, str]:
        """(message content, finish_reason) for one reply, with the request's fault applied."""
        constrained = schema is not None
        if schema is None:
            schema = schema_in_prompt(messages)
        if fault == "schema_violation" and schema is not None:
            wrong = violating_instance(schema)
            if wrong is not None:
                return json.dumps(wrong), "stop"
        if self.responder is not None:
            value = self.responder(messages, schema)
            text = value if isinstance(value, str) else json.dumps(value)
        else:
            text = json.dumps(minimal_instance(schema) if schema is not None else {})
        if fault == "truncated":
            return text[: max(1, len(text) // 2)], "length"
        if fault in ("invalid_json", "schema_violation"):
            return "I am not sure what the JSON should look like here.", "stop"
        if not constrained:
            # Unconstrained models wrap their JSON in thoughts and prose; clients must dig it out.
            text = f"<think>The user wants JSON.</think>\nHere is the answer:\n```json\n{text}\n```"
        return text, "stop"


def _completion(model: str, content: str, finish: str, request_bytes: int) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{time.monotonic_ns()}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": finish}
        ],
        "usage": {
            "prompt_tokens": request_bytes // 4,
            "completion_tokens": max(1, len(content) // 4),
            "total_tokens": request_bytes // 4 + max(1, len(content) // 4),
        },
    }


def _json(status: int, payload: dict[str, Any]) -> Response:
    return Response(status, json.dumps(payload).encode())


def _error(status: int, message: str) -> Response:
    kind = {400: "BadRequestError", 404: "NotFoundError", 500: "InternalServerError"}.get(status, "Error")
    return _json(status, {"error": {"message": message, "type": kind, "code": status}})
