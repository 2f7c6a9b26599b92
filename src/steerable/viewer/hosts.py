"""Which `Host` and `Origin` the viewer answers: the guard against DNS rebinding, for every route.

A page of another site can make the browser send requests to the viewer's address by pointing its
own name at 127.0.0.1 (DNS rebinding): the browser then sends that name as `Host` and lets the page
read the replies, the dataset included. So every request must name this server in `Host`: a loopback
name (`localhost`, `127.0.0.1`, `[::1]`, any 127.x address), the address the server is bound to, or
the name given with `--host`; bound to every interface (`0.0.0.0`, `::`), also any IP address and
this machine's host name. The port is not compared: a rebinding page must use a name of its own,
and `ssh -L 9000:localhost:8000` forwarding rightly sends another port. A request without `Host`
(HTTP/1.0) comes from no browser and is answered. API requests (`/api/...`), reads and writes, are
refused too when their `Origin` is not this server's own (another site's page, `null`).
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Awaitable, Callable, MutableMapping
from http import HTTPStatus
from typing import Any
from urllib.parse import urlsplit

from steerable.addresses import host_name

__all__ = ["HostCheck", "HostGuard"]

Scope = MutableMapping[str, Any]
ASGIApp = Callable[[Scope, Any, Any], Awaitable[None]]

_WILDCARDS = ("0.0.0.0", "::", "")


def _ip(name: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(name.strip("[]"))
    except ValueError:
        return None


class HostCheck:
    """The names one viewer answers for: `given` is the `--host` the user passed, `bound` the address
    the socket is bound to."""

    def __init__(self, given: str, bound: str) -> None:
        self.wildcard = bound in _WILDCARDS
        names = {"localhost", given.lower().strip("[]").rstrip("."), bound.lower()}
        if self.wildcard:
            names.add(socket.gethostname().lower())
        self.names = frozenset(n for n in names if n and n not in _WILDCARDS)

    def allows_host(self, header: str | None) -> bool:
        if header is None:
            return True
        name = host_name(header).rstrip(".")  # `localhost.` is `localhost`
        if not name:
            return False
        address = _ip(name)
        if address is not None and (address.is_loopback or self.wildcard):
            return True
        return name in self.names or (address is not None and str(address) in self.names)

    def refusal(self, path: str, host: str | None, origin: str | None) -> str | None:
        """Why a request is refused (403), or None."""
        if not self.allows_host(host):
            return (f"this viewer answers requests for this machine's own names only, not for host {host!r} "
                    "(to reach it by another name, start it with --host NAME)")
        if path.startswith("/api/") and origin is not None and urlsplit(origin).netloc != host:
            return f"requests from another site ({origin}) are refused"
        return None


class HostGuard:
    """ASGI layer: a request `HostCheck` refuses gets 403 with one line of text and reaches no route."""

    def __init__(self, app: ASGIApp, check: HostCheck) -> None:
        self.app, self.check = app, check

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope.get("type") == "http":
            headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
            reason = self.check.refusal(scope.get("path", ""), headers.get("host"), headers.get("origin"))
            if reason is not None:
                from starlette.responses import Response

                reply = Response(f"forbidden: {reason}\n".encode(), HTTPStatus.FORBIDDEN, media_type="text/plain",
                                 headers={"Cache-Control": "no-cache"})
                await reply(scope, receive, send)
                return
        await self.app(scope, receive, send)
