"""A small asyncio HTTP/1.1 server: keep-alive, Content-Length and chunked bodies, nothing more.

The test server must not be the bottleneck it measures: at capacity 64 and 50 ms latency it serves
~1,300 requests/s, which the stdlib's thread-per-request server cannot sustain on two cores.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from http import HTTPStatus

__all__ = ["HTTPServer", "Request", "Response"]

log = logging.getLogger(__name__)

_MAX_BODY = 256 * 1024 * 1024


@dataclass
class Request:
    """One parsed request; header names are lower-case."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Response:
    """What a handler returns; the body is sent with its exact Content-Length."""

    status: int
    body: bytes = b""
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)


Handler = Callable[[Request], Awaitable[Response]]


class _BadRequest(Exception):
    pass


class HTTPServer:
    """Serves `handler` on host:port (port 0 picks a free one) until `close()`."""

    def __init__(self, handler: Handler, host: str = "127.0.0.1", port: int = 0) -> None:
        self._handler = handler
        self.host = host
        self.port = port
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        """Bind and start accepting connections; `port` holds the bound port afterwards."""
        self._server = await asyncio.start_server(self._serve, self.host, self.port, backlog=2048)
        self.port = self._server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        """Stop listening and drop every open connection, cancelling requests being handled."""
        if self._server is not None:
            self._server.close()
        for task in list(self._connections):
            task.cancel()
        for task in list(self._connections):
            with contextlib.suppress(BaseException):
                await task
        if self._server is not None:
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            while True:
                try:
                    request = await _read_request(reader)
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                except (_BadRequest, asyncio.LimitOverrunError, ValueError) as exc:
                    await _write(
                        writer,
                        Response(400, json.dumps({"error": {"message": str(exc)}}).encode()),
                        keep_alive=False,
                    )
                    return
                try:
                    response = await self._handler(request)
                except Exception:
                    log.exception("test server handler failed")
                    response = Response(500, b'{"error": {"message": "internal error"}}')
                keep_alive = request.headers.get("connection", "").lower() != "close"
                await _write(writer, response, keep_alive=keep_alive)
                if not keep_alive:
                    return
        except ConnectionError:
            return
        finally:
            self._connections.discard(task)
            writer.close()


async def _read_request(reader: asyncio.StreamReader) -> Request:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    try:
        method, target, _version = lines[0].split(" ", 2)
    except ValueError as exc:
        raise _BadRequest("malformed request line") from exc
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if line:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
    if headers.get("transfer-encoding", "").lower() == "chunked":
        body = await _read_chunked(reader)
    else:
        length = int(headers.get("content-length", "0"))
        if length > _MAX_BODY:
            raise _BadRequest("request body too large")
        body = await reader.readexactly(length) if length else b""
    return Request(method.upper(), target.split("?", 1)[0], headers, body)


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    parts: list[bytes] = []
    while True:
        size = int((await reader.readuntil(b"\r\n")).split(b";")[0].strip(), 16)
        if size == 0:
            await reader.readuntil(b"\r\n")
            return b"".join(parts)
        parts.append(await reader.readexactly(size))
        await reader.readexactly(2)


async def _write(writer: asyncio.StreamWriter, response: Response, *, keep_alive: bool) -> None:
    reason = HTTPStatus(response.status).phrase
    lines = [
        f"HTTP/1.1 {response.status} {reason}",
        f"Content-Type: {response.content_type}",
        f"Content-Length: {len(response.body)}",
        f"Connection: {'keep-alive' if keep_alive else 'close'}",
        *(f"{k}: {v}" for k, v in response.headers.items()),
    ]
    writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + response.body)
    await writer.drain()
