"""The viewer answers only requests that name it: a foreign `Host` (DNS rebinding) is refused on every
route, a foreign `Origin` on the API; requests that name it are served as before."""

from __future__ import annotations

import http.client
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from steerable.viewer.hosts import HostCheck
from viewer_data import start_view

FOREIGN = "rebind.example"
PATHS = ["/", "/api/dataset", "/api/episodes/0", "/files/meta/info.json", "/assets/app.js"]


@pytest.fixture(scope="module")
def server(viewer_ds: Path) -> Iterator[tuple[str, int]]:
    proc, url = start_view(str(viewer_ds))
    host, port = url[len("http://"):].rstrip("/").rsplit(":", 1)
    yield host, int(port)
    proc.terminate()
    proc.wait(timeout=10)


def get(server: tuple[str, int], path: str, headers: dict[str, str]) -> tuple[int, bytes]:
    """A GET with these headers exactly (`Host` among them replaces the one http.client would add)."""
    conn = http.client.HTTPConnection(*server, timeout=30)
    conn.request("GET", path, headers=headers)
    reply = conn.getresponse()
    body = reply.read()
    conn.close()
    return reply.status, body


@pytest.mark.parametrize("path", [*PATHS, "/files/.steerable/run_summary.json"])
def test_a_foreign_host_is_refused_everywhere(server: tuple[str, int], path: str) -> None:
    status, body = get(server, path, {"Host": f"{FOREIGN}:{server[1]}"})
    assert status == 403 and body.startswith(b"forbidden: ") and FOREIGN.encode() in body
    assert body.count(b"\n") == 1, "one short line, nothing of the dataset"


def test_a_foreign_origin_is_refused_on_the_api(server: tuple[str, int]) -> None:
    own = f"127.0.0.1:{server[1]}"
    status, body = get(server, "/api/dataset", {"Host": own, "Origin": f"http://{FOREIGN}"})
    assert status == 403 and b"another site" in body
    assert get(server, "/api/dataset", {"Host": own, "Origin": "null"})[0] == 403
    assert get(server, "/api/dataset", {"Host": own, "Origin": f"http://{own}"})[0] == 200  # its own page


@pytest.mark.parametrize("host", ["127.0.0.1:{port}", "localhost:{port}", "LOCALHOST:{port}", "[::1]:{port}",
                                  "127.0.0.1", "localhost:9000"])  # 9000: `ssh -L 9000:localhost:PORT`
def test_requests_naming_this_machine_are_served(server: tuple[str, int], host: str) -> None:
    for path in PATHS:
        assert get(server, path, {"Host": host.format(port=server[1])})[0] == 200, path


def test_names_allowed_by_the_address_and_the_given_host() -> None:
    named = HostCheck("viewer.lab.example", "10.1.2.3")
    assert named.allows_host("viewer.lab.example:8000") and named.allows_host("10.1.2.3:8000")
    assert named.allows_host("127.0.0.1:8000") and named.allows_host(None)  # no Host: no browser
    assert not named.allows_host(f"{FOREIGN}:8000") and not named.allows_host("10.1.2.4:8000")
    assert not named.allows_host("") and not named.allows_host("[::1")
    everywhere = HostCheck("0.0.0.0", "0.0.0.0")  # any address names it; a rebinding page needs a name
    assert everywhere.allows_host("192.168.1.20:8000") and everywhere.allows_host("[fe80::1]:8000")
    assert everywhere.allows_host(f"{socket.gethostname()}:8000")
    assert not everywhere.allows_host(f"{FOREIGN}:8000")
    assert HostCheck("127.0.0.1", "127.0.0.1").refusal("/api/dataset", "localhost:1", "http://localhost:2") is not None
    assert HostCheck("127.0.0.1", "127.0.0.1").refusal("/files/x", "localhost:1", "http://localhost:2") is None
