"""Network names as the servers read them: the name part of a `Host` header, and whether an address or
name is this machine only. One reading for every server (the viewer, `serve-policy`)."""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

__all__ = ["host_name", "is_loopback"]


def host_name(header: str) -> str:
    """The name part of a `Host` header (`[::1]:8000` -> `::1`), lower case; "" when it has none."""
    try:
        return urlsplit(f"//{header}").hostname or ""
    except ValueError:  # a malformed port or bracket
        return ""


def is_loopback(host: str) -> bool:
    """Whether `host` (an address or name, maybe with brackets) is this machine only."""
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return host.lower() == "localhost"
