"""The viewer's listening side: binding its socket (a busy port a one-line error) and the HTTP
connection protocol uvicorn runs on each accepted connection (TCP_NODELAY set)."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import socket

from steerable.errors import ConfigError

__all__ = ["listen", "nodelay_protocol"]


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def listen(host: str, port: int) -> socket.socket:
    """A socket listening on host:port (port 0: any free port); failing to bind is a `ConfigError`."""
    try:
        return _bind(host, port)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise ConfigError(f"port {port} on {host} is already in use; pass another --port (or 0 for any)") from exc
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc


def nodelay_protocol() -> type[asyncio.Protocol]:
    """uvicorn's h11 protocol with TCP_NODELAY on every connection.

    A reply goes out as its headers and then its body; with Nagle's algorithm the body waits for the
    client to ACK the headers, which a kept-alive connection delays by up to 40 ms (measured: 45 ms per
    small reply after a connection's first under uvicorn as under the stdlib server; asyncio does
    not set the option on accepted sockets).
    """
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class NoDelayH11(H11Protocol):
        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            sock = transport.get_extra_info("socket")
            if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            super().connection_made(transport)

    return NoDelayH11
