"""`steerable serve-policy`: a low-level controller served over a websocket, for a robot whose computer
has no GPU (`steerable run --policy.server HOST:PORT` is the client, `steerable.runtime.remote_policy`).

One connection carries the observations and the chunks (`steerable.runtime.policy_wire`). Each
connection is served on its own thread; the controller runs one call at a time (a lock), so two
clients share one model. A call that raises is answered as a chunk with an `error` (the robot holds
still and the operator is told); the server goes on.

Who may connect: the server listens on loopback unless told otherwise (`--host`), and the opening
handshake is refused before any message is read when it carries an `Origin` (a browser: the server
has no page of its own, so any page that connects is another site's), names another host than
loopback while the server listens there (DNS rebinding), or lacks the server's token. A message is
at most `max_message_mb` (the connection is closed with 1009 past it, before the rest is read), and
an `act` whose fields, dtypes or shapes do not fit the served policy (`policy_wire.act_from_message`)
is answered with an `error` message: that client is told why, and every client goes on being served.
"""

from __future__ import annotations

import hmac
import logging
import secrets
import threading
import time
from collections.abc import Callable
from http import HTTPStatus
from typing import Any, ClassVar

import numpy as np
from pydantic import ConfigDict, Field, model_validator

from steerable.addresses import host_name, is_loopback
from steerable.control import ENVIRONMENT_STATE_FEATURE, ActionChunk, ContinuesChunks, LowLevelController
from steerable.errors import ConfigError
from steerable.policy.config import PolicyConfig
from steerable.runtime.policy_observation import RunsPolicy
from steerable.runtime.policy_wire import (
    MAX_MESSAGE_MB,
    PROTOCOL,
    ServedFeatures,
    act_from_message,
    chunk_message,
    error_message,
    pack,
    unpack,
)
from steerable.runtime.settings import CheckpointPath
from steerable.settings import Settings

__all__ = ["PolicyServer", "ServePolicySettings", "ServedPolicySettings", "served_features",
           "served_state_keys"]

logger = logging.getLogger(__name__)


class ServedPolicySettings(Settings):
    """`--policy.*` of `steerable serve-policy`."""

    model_config = ConfigDict(extra="forbid")
    section: ClassVar[str] = "policy"

    path: CheckpointPath = Field(
        None, description="the trained policy checkpoint to serve (a `steerable train` output, one of its checkpoints, "
        "or its checkpoints/latest; required)")
    device: str = Field("cpu", description="device for the policy (cuda on the GPU machine)")


class ServePolicySettings(Settings):
    """Everything `steerable serve-policy` does: which policy, where it listens."""

    model_config = ConfigDict(extra="forbid")
    doc: ClassVar[str | None] = "docs/run.md"

    policy: ServedPolicySettings = Field(default_factory=ServedPolicySettings)
    host: str = Field("127.0.0.1", description="address to listen on (127.0.0.1: this machine only, reached from "
                      "the robot through an SSH tunnel; 0.0.0.0: every interface)")
    port: int = Field(8765, ge=1, le=65535, description="port to listen on")
    max_message_mb: float = Field(MAX_MESSAGE_MB, gt=0, le=1024, description="the largest message a client may "
                                  "send (MB): raise it for many or large camera frames")

    @model_validator(mode="after")
    def _checkpoint(self) -> ServePolicySettings:
        if not self.policy.path:
            raise ConfigError("--policy.path CKPT is required: the trained policy checkpoint to serve")
        return self

    @property
    def checkpoint(self) -> str:
        assert self.policy.path is not None
        return self.policy.path


def _served_config(controller: object) -> PolicyConfig | None:
    """The checkpoint's configuration behind `controller`, or None for a controller without one."""
    return controller.runner.cfg if isinstance(controller, RunsPolicy) else None


def served_state_keys(controller: object) -> list[str]:
    """The state features a served policy reads (so the client can check its observation), else []."""
    cfg = _served_config(controller)
    return list(cfg.read_state_keys) if cfg is not None else []


def served_features(controller: object) -> ServedFeatures:
    """What a request to `controller` must hold (all unknown for a controller without a policy config)."""
    cfg = _served_config(controller)
    if cfg is None:
        return ServedFeatures()
    located = cfg.located if cfg.locate_key else 0
    return ServedFeatures(
        state_size=cfg.state_dim - located if cfg.state_dim else None,
        environment_state=ENVIRONMENT_STATE_FEATURE in cfg.read_state_keys,
        cameras=tuple(cfg.cameras),
        action_dim=cfg.action_dim or None,
    )


class _OneLine(logging.Filter):
    """The websockets library's records for this server as one warning line each: a port scanner's junk
    handshake or a client's broken connection is noted, never printed as the library's traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and record.exc_info[1] is not None:
            exc = record.exc_info[1]
            record.msg, record.args = f"{record.getMessage()} ({type(exc).__name__}: {exc})", ()
            record.exc_info = record.exc_text = None
            record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


def _library_logger() -> logging.Logger:
    library = logging.getLogger(f"{__name__}.websockets")
    if not any(isinstance(f, _OneLine) for f in library.filters):
        library.addFilter(_OneLine())
    return library


class PolicyServer:
    """Serves `controller` on `host:port` (port 0: any free port, see `port` once started) to clients
    holding `token` (default: a random one, see `token`)."""

    def __init__(self, controller: LowLevelController, host: str = "127.0.0.1", port: int = 8765, *,
                 token: str | None = None, max_message_mb: float = MAX_MESSAGE_MB) -> None:
        self.controller = controller
        self.host = host
        self.port = port
        self.token = token or secrets.token_urlsafe(18)
        self.max_size = int(max_message_mb * 1024 * 1024)
        self.features = served_features(controller)
        self._loopback = is_loopback(host)
        self._lock = threading.Lock()
        self._server: Any = None
        self._thread: threading.Thread | None = None

    def hello(self) -> dict[str, Any]:
        c = self.controller
        cameras = self.features.cameras
        return {"type": "hello", "protocol": PROTOCOL, "name": c.name, "wants_images": bool(getattr(c, "wants_images",
                True)), "guides": isinstance(c, ContinuesChunks), "state_keys": served_state_keys(c),
                "cameras": None if cameras is None else list(cameras), "max_size": self.max_size}

    def _open(self) -> None:
        from websockets.sync.server import serve

        self._server = serve(self._handle, self.host, self.port, max_size=self.max_size, compression=None,
                             process_request=self._check_handshake, logger=_library_logger())
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

    # -- who may connect --------------------------------------------------------------------------
    def _check_handshake(self, connection: Any, request: Any) -> Any:
        """None to accept the handshake, else the HTTP refusal (see the module docstring)."""
        headers = request.headers
        origins = headers.get_all("Origin")
        if origins:
            return self._refuse(connection, HTTPStatus.FORBIDDEN, f"a browser's connection (Origin {origins[0]}) "
                                "is refused: the policy server has no page")
        hosts = headers.get_all("Host")
        if self._loopback and (len(hosts) != 1 or not is_loopback(host_name(hosts[0]))):
            return self._refuse(connection, HTTPStatus.FORBIDDEN,
                                f"this server answers for this machine only, not for host {', '.join(hosts)!r}")
        given = headers.get_all("Authorization")
        scheme, _, token = given[0].partition(" ") if len(given) == 1 else ("", "", "")
        if scheme.lower() != "bearer" or not hmac.compare_digest(token.strip().encode(), self.token.encode()):
            why = "a wrong token" if given else "no token"
            return self._refuse(connection, HTTPStatus.UNAUTHORIZED,
                                f"{why}: pass the token `steerable serve-policy` printed (--policy.token)")
        return None

    @staticmethod
    def _refuse(connection: Any, status: HTTPStatus, why: str) -> Any:
        logger.warning("refused a connection from %s: %s", getattr(connection, "remote_address", "?"), why)
        return connection.respond(status, why + "\n")

    # -- serving ------------------------------------------------------------------------------------
    def _handle(self, ws: Any) -> None:
        from websockets.exceptions import ConnectionClosed

        peer = getattr(ws, "remote_address", None)
        try:
            try:
                first = unpack(ws.recv())
            except ValueError as exc:
                first = {"type": f"malformed ({exc})"}
            if first["type"] != "hello" or first.get("protocol") != PROTOCOL:
                why = (f"this server speaks protocol {PROTOCOL} (steerable on both machines must match)"
                       if first["type"] == "hello" else "the first message must be hello")
                ws.send(pack(error_message(why)))
                ws.close(1002, why[:100])
                logger.warning("client %s: %s", peer, why)
                return
            ws.send(pack(self.hello()))
            logger.info("client %s connected", peer)
            for data in ws:
                ws.send(pack(self._answer(data, peer)))
        except ConnectionClosed as exc:
            if exc.rcvd is None and exc.sent is not None and exc.sent.code == 1009:
                logger.warning("client %s: a message over %d bytes (--max_message_mb): connection closed", peer,
                               self.max_size)
        logger.info("client %s left", peer)

    def _answer(self, data: bytes | str, peer: Any) -> dict[str, Any]:
        """The reply to one message: a chunk, or an `error` naming what is wrong with the request."""
        try:
            message = unpack(data)
            if message["type"] != "act":
                raise ValueError(f"unknown request {message['type'][:40]!r} (this server answers act)")
            request = act_from_message(message, self.features)
        except ValueError as exc:
            logger.warning("client %s: a malformed request: %s", peer, exc)
            return error_message(f"malformed request: {exc}")
        c = self.controller
        started = time.perf_counter()
        with self._lock:
            if request.reset:
                c.reset()
            try:
                if request.prefix is not None and isinstance(c, ContinuesChunks):
                    chunk = c.act_continuing(request.observation, request.command, request.prefix)
                else:
                    chunk = c.act(request.observation, request.command)
            except Exception as exc:  # the client holds still and tells its operator; we go on
                logger.warning("%s failed on %r: %s", c.name, request.command, exc)
                error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
                chunk = ActionChunk(np.zeros((0, 0), np.float32), error=f"the policy server's {c.name} failed: {error}")
        return chunk_message(chunk, time.perf_counter() - started)
