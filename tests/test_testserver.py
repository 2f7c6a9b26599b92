"""The local OpenAI-compatible test server: protocol, schema-valid replies, capacity, faults, CLI."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any, Literal

import jsonschema
import pytest
from pydantic import BaseModel, Field

from steerable.testing.server import FAULT_KINDS, FaultPlan, TestServer, minimal_instance


async def _post(port: int, payload: dict[str, Any], timeout: float = 10.0) -> tuple[int, dict[str, Any]]:
    """One raw HTTP/1.1 request (no client library between the test and the server)."""
    body = json.dumps(payload).encode()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout)
        status = int(head.split(b" ")[1])
        length = next(
            int(line.split(b":")[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length")
        )
        return status, json.loads(await reader.readexactly(length))
    finally:
        writer.close()


async def _get(port: int, path: str) -> tuple[int, dict[str, Any]]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(f"GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n".encode())
        raw = await reader.read()
    finally:
        writer.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    return int(head.split(b" ")[1]), json.loads(body)


def _chat(
    schema: dict[str, Any] | None = None, model: str = "test-model", text: str = "hi"
) -> dict[str, Any]:
    payload: dict[str, Any] = {"model": model, "messages": [{"role": "user", "content": text}]}
    if schema is not None:
        payload["response_format"] = {"type": "json_schema", "json_schema": {"name": "t", "schema": schema}}
    return payload


def _content(reply: dict[str, Any]) -> str:
    return str(reply["choices"][0]["message"]["content"])


@pytest.fixture
def server() -> Iterator[TestServer]:
    with TestServer(model_ids=["m1", "m2"]) as srv:
        yield srv


class Span(BaseModel):
    label: str = Field(min_length=3)
    start: float = Field(ge=0.5)
    end: float = Field(gt=1.0)
    kind: Literal["grasp", "move"]


class Plan(BaseModel):
    steps: list[Span] = Field(min_length=2)
    count: int = Field(ge=3, le=9)
    note: str | None = None


def test_models_and_health_endpoints(server: TestServer) -> None:
    status, models = asyncio.run(_get(server.port, "/v1/models"))
    assert status == 200 and [m["id"] for m in models["data"]] == ["m1", "m2"]
    assert asyncio.run(_get(server.port, "/health"))[0] == 200
    assert asyncio.run(_get(server.port, "/nope"))[0] == 404


def test_json_schema_reply_is_valid_even_for_pydantic_schemas_with_refs(server: TestServer) -> None:
    schema = Plan.model_json_schema()
    assert "$defs" in schema
    status, reply = asyncio.run(_post(server.port, _chat(schema, model="m2")))
    assert status == 200
    value = json.loads(_content(reply))
    jsonschema.validate(value, schema)
    Plan.model_validate(value)
    assert reply["choices"][0]["finish_reason"] == "stop" and reply["usage"]["prompt_tokens"] > 0
    assert server.stats.response_format_requests == 1


def test_unknown_model_is_a_404(server: TestServer) -> None:
    status, reply = asyncio.run(_post(server.port, _chat(model="other")))
    assert status == 404 and "other" in reply["error"]["message"]


def test_without_structured_output_response_format_is_refused_and_prose_is_returned() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 2}}, "required": ["n"]}
    with TestServer(structured_output=False) as srv:
        status, reply = asyncio.run(_post(srv.port, _chat(schema)))
        assert status == 400 and "response_format" in reply["error"]["message"]
        prompt = "Reply with JSON matching this schema:\n" + json.dumps(schema)
        status, reply = asyncio.run(_post(srv.port, _chat(text=prompt)))
    assert status == 200
    content = _content(reply)
    assert content.startswith("<think>") and "```json" in content  # like an unconstrained model
    assert json.loads(content.split("```json")[1].split("```")[0]) == {"n": 2}


def test_capacity_limits_requests_served_at_once() -> None:
    with TestServer(latency_s=0.2, capacity=2) as srv:

        async def burst() -> list[int]:
            return [s for s, _ in await asyncio.gather(*(_post(srv.port, _chat()) for _ in range(6)))]

        started = time.perf_counter()
        statuses = asyncio.run(burst())
        elapsed = time.perf_counter() - started
    assert statuses == [200] * 6
    assert srv.stats.max_serving == 2 and srv.stats.max_in_flight == 6
    assert elapsed >= 0.55  # three waves of two, 0.2 s each


def test_fault_sequence_is_deterministic_per_seed() -> None:
    def sequence(seed: int) -> list[str | None]:
        plan = FaultPlan(rate=0.3, seed=seed)
        return [plan.next() for _ in range(300)]

    first, again, other = sequence(7), sequence(7), sequence(8)
    assert first == again and first != other
    drawn = [f for f in first if f is not None]
    assert 0.2 < len(drawn) / len(first) < 0.4
    assert set(drawn) == set(FAULT_KINDS)
    scripted = FaultPlan(script=["http_500", None])
    assert [scripted.next() for _ in range(3)] == ["http_500", None, None]
    with pytest.raises(ValueError, match="unknown fault kinds"):
        FaultPlan(kinds=["segfault"])


def test_each_fault_kind_is_visible_on_the_wire() -> None:
    schema = {"type": "object", "properties": {"label": {"type": "string"}}, "required": ["label"]}
    script = ["http_500", "truncated", "invalid_json", "schema_violation", "timeout"]
    with TestServer(faults=FaultPlan(script=script, timeout_s=5.0)) as srv:

        async def run() -> list[tuple[int, dict[str, Any]]]:
            return [await _post(srv.port, _chat(schema)) for _ in range(4)]

        (s500, _), (_, truncated), (_, invalid), (_, violating) = asyncio.run(run())
        with pytest.raises(asyncio.TimeoutError):
            asyncio.run(_post(srv.port, _chat(schema), timeout=0.3))
        assert srv.stats.faults == dict.fromkeys(script, 1)
    assert s500 == 500
    assert truncated["choices"][0]["finish_reason"] == "length"
    for reply in (truncated, invalid):
        with pytest.raises(json.JSONDecodeError):
            json.loads(_content(reply))
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(json.loads(_content(violating)), schema)


def test_responder_decides_the_reply() -> None:
    seen: list[Any] = []

    def responder(messages: list[dict[str, Any]], schema: dict[str, Any] | None) -> Any:
        seen.append((messages[0]["content"], schema))
        return {"echo": messages[0]["content"]}

    with TestServer(responder=responder) as srv:
        _, reply = asyncio.run(_post(srv.port, _chat({"type": "object"}, text="ping")))
    assert json.loads(_content(reply)) == {"echo": "ping"} and seen == [("ping", {"type": "object"})]


def test_minimal_instance_respects_bounds_enums_and_arrays() -> None:
    schema = Plan.model_json_schema()
    value = minimal_instance(schema)
    assert value["count"] == 3 and len(value["steps"]) == 2
    assert value["steps"][0] == {"label": "xxx", "start": 0.5, "end": 2.0, "kind": "grasp"}


def test_command_line_server_serves_until_interrupted() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "steerable.testing.server", "--port", "0", "--latency", "0.01",
         "--capacity", "4", "--fault-rate", "0.2", "--model", "cli-model"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert "listening on http://127.0.0.1:" in line
        port = int(line.rsplit(":", 1)[1].split("/")[0])
        status, models = asyncio.run(_get(port, "/v1/models"))
        assert status == 200 and models["data"][0]["id"] == "cli-model"
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_command_line_rejects_unknown_fault_kinds() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "steerable.testing.server", "--port", "0", "--fault-kinds", "segfault"],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert result.returncode == 2 and "unknown fault kinds" in result.stderr
