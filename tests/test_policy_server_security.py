"""Who `steerable serve-policy` answers (issue 34, item 8): loopback by default, a token, no browser,
bounded messages, and a malformed request answered with an error while every client goes on being
served. The real command runs in a subprocess, with a fake policy standing in for a checkpoint."""

from __future__ import annotations

import io
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import ClientConnection, connect

from process_helpers import free_port
from steerable.cli.main import main
from steerable.control import ActionChunk, Observation
from steerable.errors import ConfigError
from steerable.runtime.policy_server import PolicyServer, ServePolicySettings
from steerable.runtime.policy_wire import PROTOCOL, auth_header, pack, unpack
from steerable.runtime.remote_policy import connect_policy

TOP = "observation.images.top"

# `steerable serve-policy` itself, its checkpoint loader replaced by a fake policy that reads a state
# of 3 values and the top camera, and acts in 2 dimensions (no torch, no checkpoint).
SERVE = '''
import sys, types
import numpy as np
from steerable.control import ActionChunk

class Config:
    state_dim, action_dim, cameras, located, locate_key = 3, 2, ["observation.images.top"], 0, ""
    state_keys = read_state_keys = ["observation.state"]

class Fake:
    name = "fake policy"
    wants_images = True
    runner = types.SimpleNamespace(cfg=Config())

    def act(self, observation, command):
        return ActionChunk(np.full((4, 2), float(observation.state.sum()), dtype=np.float32))

    def reset(self):
        pass

adapter = types.ModuleType("steerable.runtime.policy_adapter")
adapter.load_low_level = lambda path, device, observation: Fake()
sys.modules["steerable.runtime.policy_adapter"] = adapter
from steerable.cli.main import main
sys.exit(main(["serve-policy", "--policy.path", "ckpt", *sys.argv[1:]]))
'''


@dataclass
class Served:
    proc: subprocess.Popen[str]
    port: int
    token: str
    line: str
    output: list[str] = field(default_factory=list)  # every line it printed, stdout and stderr

    @property
    def uri(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    def text(self) -> str:
        time.sleep(0.2)  # its last log lines
        return "\n".join(self.output)


def _serve(tmp_path: Path, *flags: str) -> Served:
    script = tmp_path / "serve.py"
    script.write_text(SERVE)
    port = free_port()
    proc = subprocess.Popen([sys.executable, str(script), "--port", str(port), *flags], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    output: list[str] = []
    ready = threading.Event()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            output.append(line.rstrip("\n"))
            if line.startswith("serving "):
                ready.set()

    threading.Thread(target=read, daemon=True).start()
    if not ready.wait(30):
        proc.kill()
        raise AssertionError(f"serve-policy did not start: {output}")
    line = next(text for text in output if text.startswith("serving "))
    found = re.search(r"--policy\.token (\S+)", line)
    assert found, line
    return Served(proc, port, found.group(1), line, output)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    server = _serve(tmp_path_factory.mktemp("serve"), "--max_message_mb", "1")
    try:
        yield server
    finally:
        server.proc.terminate()
        server.proc.wait(10)


class _Still:
    """A controller that never moves: a server that is started and stopped, never asked."""

    name = "still"

    def act(self, observation: Observation, command: str) -> ActionChunk:
        return ActionChunk(np.zeros((0, 3), np.float32))

    def reset(self) -> None:
        pass


def _hello(served: Served, **options: Any) -> ClientConnection:
    ws = connect(served.uri, additional_headers=auth_header(served.token), max_size=None, **options).__enter__()
    ws.send(pack({"type": "hello", "protocol": PROTOCOL}))
    assert unpack(ws.recv(timeout=5))["type"] == "hello"
    return ws


def _act(state: Any = None, images: Any = None, **extra: Any) -> dict[str, Any]:
    observation = {"state": np.ones(3, np.float32) if state is None else state,
                   "images": {TOP: np.zeros((8, 8, 3), np.uint8)} if images is None else images,
                   "time_s": 0.0, "state_names": [], "environment_state": None}
    return {"type": "act", "command": "wave", "reset": False, "prefix": None, "observation": observation, **extra}


def _refusal(served: Served, **options: Any) -> tuple[int, str]:
    with pytest.raises(InvalidStatus) as refused:
        connect(served.uri, **options).__enter__()
    response = refused.value.response
    return response.status_code, bytes(response.body or b"").decode()


def test_it_listens_on_loopback_by_default_and_says_how_to_connect_with_its_token(served: Served) -> None:
    assert ServePolicySettings(policy={"path": "ckpt"}).host == "127.0.0.1"
    assert f"on ws://127.0.0.1:{served.port};" in served.line
    assert f"connect with: steerable run --policy.server 127.0.0.1:{served.port} --policy.token " in served.line
    assert len(served.token) >= 16
    assert not any(line.startswith("warning:") for line in served.output)
    quiet = PolicyServer(_Still(), port=0).start()
    try:
        assert quiet._server.socket.getsockname()[0] == "127.0.0.1"
        assert quiet.token and quiet.token != PolicyServer(_Still()).token
    finally:
        quiet.close()


def test_a_missing_or_wrong_token_is_refused_before_the_websocket_opens(served: Served) -> None:
    status, body = _refusal(served)
    assert status == 401 and body.startswith("no token")
    status, body = _refusal(served, additional_headers=auth_header("not-" + served.token))
    assert status == 401 and body.startswith("a wrong token")
    with pytest.raises(ConfigError, match="the policy server needs its token: pass the token .*--policy.token"):
        connect_policy(f"127.0.0.1:{served.port}", token="")
    with pytest.raises(ConfigError, match="refused the token given"):
        connect_policy(f"127.0.0.1:{served.port}", token="wrong")
    low = connect_policy(f"127.0.0.1:{served.port}", token=served.token)
    try:
        assert low.cameras == (TOP,)
        # Only the camera the served policy reads is sent; the state is checked against its 3 values.
        blank = np.zeros((8, 8, 3), np.uint8)
        obs = Observation(state=np.ones(3, np.float32), images={TOP: blank, "observation.images.wrist": blank})
        chunk = low.act(obs, "wave")
        assert chunk.error is None and chunk.actions.shape == (4, 2) and float(chunk.actions[0, 0]) == 3.0
    finally:
        low.close()


def test_the_cli_client_takes_the_token_from_its_flag_or_the_environment(served: Served, capsys: Any,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    argv = ["run", "--env", "sim", "--policy.server", f"127.0.0.1:{served.port}", "--task",
            "put the red cube in the left bin"]
    monkeypatch.setattr("sys.stdin", io.StringIO(""))  # piped: no commands
    assert main([*argv, "--policy.token", "wrong"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "the policy server refused the token given" in err[0]
    monkeypatch.setenv("STEERABLE_POLICY_TOKEN", served.token)
    low = connect_policy(f"127.0.0.1:{served.port}")
    low.close()
    assert main(["run", "--policy.token", "x", "--task", "wave"]) == 2
    assert "--policy.token is the token of a policy server" in capsys.readouterr().err


def test_a_browser_of_another_site_and_a_rebound_host_are_refused(served: Served) -> None:
    token = auth_header(served.token)
    status, body = _refusal(served, additional_headers=token, origin="http://evil.example")
    assert status == 403 and "Origin http://evil.example" in body
    # DNS rebinding: a name of another site that resolves to this machine.
    with socket.create_connection(("127.0.0.1", served.port), timeout=5) as sock, \
            pytest.raises(InvalidStatus) as refused:
        connect(f"ws://evil.example:{served.port}", sock=sock, additional_headers=token).__enter__()
    assert refused.value.response.status_code == 403
    assert f"not for host 'evil.example:{served.port}'" in bytes(refused.value.response.body or b"").decode()


def test_an_oversize_message_closes_that_connection_only(served: Served) -> None:
    big = _hello(served)
    other = _hello(served)
    try:
        big.send(pack(_act(images={TOP: np.zeros((700, 700, 3), np.uint8)})))  # 1.4 MB over the 1 MB bound
        with pytest.raises(ConnectionClosed) as closed:
            big.recv(timeout=10)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1009
        other.send(pack(_act()))
        assert unpack(other.recv(timeout=10))["type"] == "chunk"
        again = _hello(served)  # and new clients are still served
        again.close()
    finally:
        big.close()
        other.close()
    assert "a message over 1048576 bytes" in served.text()


@pytest.mark.parametrize(("message", "why"), [
    ({"type": "act", "command": "wave"}, "an act request needs an 'observation' map"),
    (_act(state=np.ones(5, np.float32)), "the served policy reads 3 state values, the request holds 5"),
    (_act(state=np.array([1.0, np.nan, 0.0], np.float32)), "observation.state holds values that are not finite"),
    (_act(images={"observation.images.wrist": np.zeros((8, 8, 3), np.uint8)}), "reads no camera"),
    (_act(images={TOP: np.zeros((8, 8), np.uint8)}), "HxWx3 uint8"),
    (_act(images={}), "reads camera(s) observation.images.top, which the observation lacks"),
    (_act(command=7), "command is missing or of the wrong type"),
    (_act(prefix={"actions": np.zeros((3, 5), np.float32), "weights": np.ones(3, np.float32), "delay": 1,
                  "max_guidance": 1.0}), "acts in 2 dimensions, the prefix in 5"),
    ({"type": "act", "observation": {"state": {"__ndarray__": True, "dtype": "<f4", "shape": [10**9],
                                               "data": b"\0" * 8}}}, "bytes do not match its shape"),
    ({"type": "shutdown"}, "unknown request 'shutdown'"),
], ids=["no observation", "state size", "nan", "camera name", "frame shape", "camera missing", "command",
        "prefix", "declared shape", "unknown"])
def test_a_malformed_request_is_answered_with_an_error_and_the_connection_goes_on(
        served: Served, message: dict[str, Any], why: str) -> None:
    ws = _hello(served)
    try:
        ws.send(pack(message))
        reply = unpack(ws.recv(timeout=10))
        assert reply["type"] == "error" and why in reply["error"], reply
        ws.send(b"\xc1 not msgpack")
        assert unpack(ws.recv(timeout=10))["type"] == "error"
        ws.send(pack(_act()))
        assert unpack(ws.recv(timeout=10))["type"] == "chunk"
    finally:
        ws.close()


def test_a_first_message_that_is_not_hello_is_answered_and_closed(served: Served) -> None:
    ws = connect(served.uri, additional_headers=auth_header(served.token)).__enter__()
    try:
        ws.send(pack({"type": "hello", "protocol": 1}))
        assert "this server speaks protocol 2" in unpack(ws.recv(timeout=5))["error"]
        with pytest.raises(ConnectionClosed):
            ws.recv(timeout=5)
    finally:
        ws.close()


def test_junk_on_the_port_and_everything_above_left_no_traceback(served: Served) -> None:
    for junk in (b"\x00\x01 junk\r\n\r\n", b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n\r\n"):
        with socket.create_connection(("127.0.0.1", served.port), timeout=5) as raw:
            raw.sendall(junk)
            raw.recv(1024)
    ws = _hello(served)
    ws.close()
    text = served.text()
    assert "Traceback" not in text and "KeyError" not in text, text
    assert served.proc.poll() is None, "the server is still serving"


def test_a_host_beyond_loopback_is_warned_about(tmp_path: Path) -> None:
    server = _serve(tmp_path, "--host", "0.0.0.0")
    try:
        assert any(line.startswith("warning: --host 0.0.0.0 listens beyond this machine") for line in server.output)
        assert f"--policy.server {socket.gethostname()}:{server.port} --policy.token" in server.line
    finally:
        server.proc.terminate()
        server.proc.wait(10)
