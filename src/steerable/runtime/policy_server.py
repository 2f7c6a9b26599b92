"""`steerable serve-policy`: a low-level controller served over a websocket, for a robot whose computer
has no GPU (`steerable run --policy.server HOST:PORT` is the client, `steerable.runtime.remote_policy`).

One connection carries the observations and the chunks (`steerable.runtime.policy_wire`). Each
connection is served on its own thread; the controller runs one call at a time (a lock), so two
clients share one model. A call that raises is answered as a chunk with an `error` (the robot holds
still and the operator is told); the server goes on. The server is unauthenticated: serve it on a
trusted network, or reach it through an SSH tunnel.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np
from pydantic import ConfigDict, Field, model_validator

from steerable.control import ActionChunk, ContinuesChunks, LowLevelController
from steerable.errors import ConfigError
from steerable.runtime.policy_wire import (
    PROTOCOL,
    chunk_message,
    observation_from_message,
    pack,
    prefix_from_message,
    unpack,
)
from steerable.settings import Settings

__all__ = ["PolicyServer", "ServePolicySettings", "ServedPolicySettings", "served_state_keys"]

logger = logging.getLogger(__name__)


class ServedPolicySettings(Settings):
    """`--policy.*` of `steerable serve-policy`."""

    model_config = ConfigDict(extra="forbid")
    section: ClassVar[str] = "policy"

    path: str | None = Field(None, description="the trained policy checkpoint to serve (a `steerable train` output; "
                             "required)")
    device: str = Field("cpu", description="device for the policy (cuda on the GPU machine)")


class ServePolicySettings(Settings):
    """Everything `steerable serve-policy` does: which policy, where it listens."""

    model_config = ConfigDict(extra="forbid")
    doc: ClassVar[str | None] = "docs/run.md"

    policy: ServedPolicySettings = Field(default_factory=ServedPolicySettings)
    host: str = Field("0.0.0.0", description="address to listen on (0.0.0.0: every interface)")
    port: int = Field(8765, ge=1, le=65535, description="port to listen on")

    @model_validator(mode="after")
    def _checkpoint(self) -> ServePolicySettings:
        if not self.policy.path:
            raise ConfigError("--policy.path CKPT is required: the trained policy checkpoint to serve")
        return self

    @property
    def checkpoint(self) -> str:
        assert self.policy.path is not None
        return self.policy.path


def served_state_keys(controller: object) -> list[str]:
    """The state features a served policy reads (so the client can check its observation), else []."""
    cfg = getattr(getattr(controller, "runner", None), "cfg", None)
    return [str(k) for k in getattr(cfg, "state_keys", None) or []]


class PolicyServer:
    """Serves `controller` on `host:port` (port 0: any free port, see `port` once started)."""

    def __init__(self, controller: LowLevelController, host: str = "0.0.0.0", port: int = 8765) -> None:
        self.controller = controller
        self.host = host
        self.port = port
        self._lock = threading.Lock()
        self._server: Any = None
        self._thread: threading.Thread | None = None

    def hello(self) -> dict[str, Any]:
        c = self.controller
        return {"type": "hello", "protocol": PROTOCOL, "name": c.name, "wants_images": bool(getattr(c, "wants_images",
                True)), "guides": isinstance(c, ContinuesChunks), "state_keys": served_state_keys(c)}

    def _open(self) -> None:
        from websockets.sync.server import serve

        self._server = serve(self._handle, self.host, self.port, max_size=None, compression=None)
        self.port = int(self._server.socket.getsockname()[1])

    def serve_forever(self, on_ready: Callable[[str], None] | None = None) -> None:
        """Serve until interrupted; `on_ready(address)` once it listens."""
        self._open()
        if on_ready is not None:
            on_ready(f"ws://{self.host}:{self.port}")
        try:
            self._server.serve_forever()
        finally:
            self._server.shutdown()

    def start(self) -> PolicyServer:
        """Serve on a background thread (tests, benchmarks); `close()` stops it."""
        self._open()
        self._thread = threading.Thread(target=self._server.serve_forever, name="steerable-policy-server", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
        if self._thread is not None:
            self._thread.join(5)

    def _handle(self, ws: Any) -> None:
        from websockets.exceptions import ConnectionClosed

        peer = getattr(ws, "remote_address", None)
        try:
            first = unpack(ws.recv())
            if first["type"] != "hello":
                ws.close(1002, "the first message must be hello")
                return
            ws.send(pack(self.hello()))
            logger.info("client %s connected", peer)
            for data in ws:
                ws.send(pack(self._reply(unpack(data))))
        except ConnectionClosed:
            pass
        except ValueError as exc:  # not our protocol
            logger.warning("client %s: %s", peer, exc)
            ws.close(1002, str(exc)[:100])
        logger.info("client %s left", peer)

    def _reply(self, message: dict[str, Any]) -> dict[str, Any]:
        if message["type"] != "act":
            return chunk_message(ActionChunk(np.zeros((0, 0), np.float32), error=f"unknown request {message['type']!r}"),
                                 0.0)
        c = self.controller
        started = time.perf_counter()
        with self._lock:
            if message.get("reset"):
                c.reset()
            obs, command = observation_from_message(message["observation"]), str(message["command"])
            prefix = prefix_from_message(message.get("prefix"))
            try:
                if prefix is not None and isinstance(c, ContinuesChunks):
                    chunk = c.act_continuing(obs, command, prefix)
                else:
                    chunk = c.act(obs, command)
            except Exception as exc:  # the client holds still and tells its operator; we go on
                logger.warning("%s failed on %r: %s", c.name, command, exc)
                error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
                chunk = ActionChunk(np.zeros((0, 0), np.float32), error=f"the policy server's {c.name} failed: {error}")
        return chunk_message(chunk, time.perf_counter() - started)
