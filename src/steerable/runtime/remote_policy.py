"""The low level served by `steerable serve-policy`, as the runtime's controller (`steerable run
--policy.server HOST:PORT`): observations out, chunks back, over one websocket connection.

The server is asked once when the run starts: one that does not answer stops `steerable run` there
(one line, exit status 2), as a wrong `--vlm.base_url` does. Later, a lost connection (the server
died, the network dropped, no reply within `timeout_s`) raises `ControllerUnavailableError`: the
runtime holds the robot still, says so once, and asks again (each call reconnects) until the
server is back. Every round trip is timed (`round_trips`); the runtime measures each chunk's delay
itself and starts the next one early by that much (`steerable.runtime.chunks`). A server whose
policy can continue a chunk under way (`guides`) gets the prefix and runs real-time chunking itself
(`RemoteGuidedPolicy`); otherwise the runtime blends. Every connection carries the server's token
(`--policy.token`, else the environment variable `STEERABLE_POLICY_TOKEN`); only the camera frames
the served policy reads are sent.
"""

from __future__ import annotations

import os
import time
from collections import deque
from typing import Any

import numpy as np

from steerable.control import ENVIRONMENT_STATE_FEATURE, ActionChunk, ChunkPrefix, Observation
from steerable.errors import ConfigError, ControllerUnavailableError
from steerable.runtime.policy_wire import (
    MAX_MESSAGE_MB,
    PROTOCOL,
    TOKEN_ENV,
    auth_header,
    chunk_from_message,
    observation_message,
    pack,
    prefix_message,
    unpack,
)

__all__ = ["RemoteGuidedPolicy", "RemotePolicy", "connect_policy", "server_uri"]


def server_uri(address: str) -> str:
    """`HOST:PORT` (or a ws:// URL) -> the websocket URL; ConfigError for anything else."""
    text = address.strip()
    if text.startswith(("ws://", "wss://")):
        return text
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"--policy.server {address!r}: write HOST:PORT, e.g. --policy.server gpu-box:8765")
    return f"ws://{host}:{int(port)}"


def _reason(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


class RemotePolicy:
    """`LowLevelController` whose chunks come from a policy server (see the module docstring)."""

    def __init__(self, address: str, hello: dict[str, Any], ws: Any, *, token: str = "", timeout_s: float = 10.0,
                 connect_timeout_s: float = 2.0) -> None:
        self.address = address
        self.uri = server_uri(address)
        self.token = token
        self.timeout_s = timeout_s
        self.connect_timeout_s = connect_timeout_s
        self.name = f"{hello.get('name', 'policy')} (served at {address})"
        self.wants_images = bool(hello.get("wants_images", True))
        self.guides = bool(hello.get("guides", False))
        cameras = hello.get("cameras")
        self.cameras = None if cameras is None else tuple(str(c) for c in cameras)  # None: send every frame
        self.max_size = int(hello.get("max_size") or 0)  # the server's bound of one message (0: none said)
        self.round_trips: deque[float] = deque(maxlen=64)  # seconds per chunk, network included
        self.server_seconds: deque[float] = deque(maxlen=64)  # the server's own inference seconds
        self._ws: Any = ws
        self._reset = False

    def reset(self) -> None:
        self._reset = True  # sent with the next request (one connection, one request at a time)

    def act(self, observation: Observation, command: str) -> ActionChunk:
        return self._request(observation, command, None)

    def close(self) -> None:
        if self._ws is not None:
            self._ws.close()
            self._ws = None

    def _request(self, observation: Observation, command: str, prefix: ChunkPrefix | None) -> ActionChunk:
        from websockets.exceptions import ConnectionClosed

        ws = self._ws if self._ws is not None else self._reconnect()
        message = {"type": "act", "command": command, "reset": self._reset, "prefix": prefix_message(prefix),
                   "observation": observation_message(observation, self.cameras)}
        data = pack(message)
        if self.max_size and len(data) > self.max_size:  # the server would close the connection on it
            return ActionChunk(np.zeros((0, 0), np.float32), error=(
                f"an observation of {len(data) / 2**20:.1f} MB is over the policy server's bound of "
                f"{self.max_size / 2**20:.1f} MB (its --max_message_mb)"))
        started = time.perf_counter()
        try:
            ws.send(data)
            reply = unpack(ws.recv(timeout=self.timeout_s))
        except (ConnectionClosed, OSError, TimeoutError, ValueError) as exc:
            self.close()
            why = f"no reply within {self.timeout_s:g} s" if isinstance(exc, TimeoutError) else _reason(exc)
            raise ControllerUnavailableError(f"policy server {self.address} lost ({why})") from exc
        self.round_trips.append(time.perf_counter() - started)
        self.server_seconds.append(float(reply.get("infer_s", 0.0)))
        self._reset = False
        return chunk_from_message(reply)

    def _reconnect(self) -> Any:
        try:
            ws, _ = _open(self.uri, self.connect_timeout_s, self.token)
        except (OSError, TimeoutError, ValueError) as exc:
            raise ControllerUnavailableError(f"policy server {self.address} unreachable ({_reason(exc)})") from exc
        self._ws = ws
        self._reset = True  # a restarted server holds no episode state of ours
        return ws


class RemoteGuidedPolicy(RemotePolicy):
    """A served policy that continues chunks under way on the server (real-time chunking)."""

    def act_continuing(self, observation: Observation, command: str, prefix: ChunkPrefix) -> ActionChunk:
        return self._request(observation, command, prefix)


def _refusal(exc: BaseException) -> str:
    """Why the server refused the handshake, in its own words (printable characters only)."""
    response = getattr(exc, "response", None)
    body = bytes(getattr(response, "body", b"") or b"").decode("utf-8", "replace").strip()[:200]
    body = "".join(c if c.isprintable() else "?" for c in body)
    status = getattr(response, "status_code", None)
    return f"refused (HTTP {status}: {body})" if status is not None and body else _reason(exc)


def _open(uri: str, timeout_s: float, token: str) -> tuple[Any, dict[str, Any]]:
    """A connection that has said hello, and the server's hello."""
    from websockets.exceptions import InvalidHandshake, InvalidURI
    from websockets.sync.client import connect

    try:
        # Entered as a context manager (websockets >= 17 asks for it); the connection outlives this
        # call and is closed by `RemotePolicy.close`.
        # Replies are bounded as requests are: a chunk is a few kB.
        ws = connect(uri, open_timeout=timeout_s, close_timeout=1.0, max_size=int(MAX_MESSAGE_MB * 2**20),
                     compression=None, additional_headers=auth_header(token)).__enter__()
    except (InvalidURI, InvalidHandshake) as exc:
        raise ValueError(_refusal(exc)) from exc
    try:
        ws.send(pack({"type": "hello", "protocol": PROTOCOL}))
        hello = unpack(ws.recv(timeout=timeout_s))
    except Exception:
        ws.close()
        raise
    if hello.get("type") != "hello" or hello.get("protocol") != PROTOCOL:
        ws.close()
        said = hello.get("error") or f"it said {hello.get('type')!r}"
        raise ValueError(f"not a steerable policy server of protocol {PROTOCOL} ({said})")
    return ws, hello


def connect_policy(address: str, observation: str = "standard", *, token: str | None = None,
                   timeout_s: float = 10.0, connect_timeout_s: float = 5.0) -> RemotePolicy:
    """The policy served at `address` (HOST:PORT), after its hello; ConfigError when it does not
    answer, refuses the token (`token`, default: the environment's `STEERABLE_POLICY_TOKEN`) or reads
    state this run cannot give (`observation`: the run's --observation)."""
    from websockets.exceptions import InvalidStatus

    uri = server_uri(address)
    token = token or os.environ.get(TOKEN_ENV, "")
    try:
        ws, hello = _open(uri, connect_timeout_s, token)
    except ValueError as exc:
        refused = exc.__cause__ if isinstance(exc.__cause__, InvalidStatus) else None
        if refused is not None and refused.response.status_code == 401:
            given = "refused the token given" if token else "needs its token"
            raise ConfigError(f"--policy.server {address}: the policy server {given}: pass the token `steerable "
                              f"serve-policy` printed, with --policy.token TOKEN or {TOKEN_ENV}=TOKEN") from exc
        if refused is not None:
            raise ConfigError(f"--policy.server {address}: the server {exc}") from exc
        raise ConfigError(f"--policy.server {address}: no steerable policy server answers there ({exc}); "
                          f"start one with `steerable serve-policy --policy.path CKPT --port PORT`") from exc
    except Exception as exc:
        raise ConfigError(f"--policy.server {address}: no steerable policy server answers there ({_reason(exc)}); "
                          f"start one with `steerable serve-policy --policy.path CKPT --port PORT`") from exc
    keys = [str(k) for k in hello.get("state_keys") or []]
    if ENVIRONMENT_STATE_FEATURE in keys and observation != "privileged":
        ws.close()
        raise ConfigError(f"the served policy reads {ENVIRONMENT_STATE_FEATURE} (object positions): run it in the "
                          "simulator with --observation privileged")
    cls = RemoteGuidedPolicy if hello.get("guides") else RemotePolicy
    return cls(address, hello, ws, token=token, timeout_s=timeout_s)
