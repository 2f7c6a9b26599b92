"""The local viewer server: stdlib ThreadingHTTPServer, read-only (GET/HEAD), confined to the dataset.

Routes: `/` the app; `/assets/*` its scripts and styles (package data); `/api/dataset`,
`/api/episodes/N`, `/api/render?recipe=R&episode=N&frame=F` JSON; `/files/REL` dataset files with
byte ranges; `/clips/N/CAMERA.mp4` H.264 clips of videos a browser cannot play as stored.

Browsers drop connections routinely (a video element abandons a range request when it seeks): a
reset or broken pipe is logged at debug level only; any other error in a request keeps its
traceback in the log.
"""

from __future__ import annotations

import errno
import json
import logging
import mimetypes
import sys
import tempfile
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit

from steerable.dataset import EpisodeMeta
from steerable.errors import ConfigError, SteerableError
from steerable.viewer.assets import ASSET_NAMES, asset_bytes, index_html
from steerable.viewer.clips import ClipStopped, browser_playable, cut_clip
from steerable.viewer.files import copy_range, parse_range, resolve_under
from steerable.viewer.site import ViewerData

__all__ = ["ViewerServer", "make_server"]

logger = logging.getLogger(__name__)

# What a client hanging up looks like from the server's side.
_DISCONNECTS = (ConnectionResetError, BrokenPipeError)


class ViewerServer(ThreadingHTTPServer):
    """The HTTP server; holds the dataset's `ViewerData` and a cache folder for transcoded clips."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], data: ViewerData) -> None:
        self.data = data
        self.root = data.ds.root
        self._clip_dir = tempfile.TemporaryDirectory(prefix="steerable-view-")
        self._clip_lock = threading.Lock()
        self._closing = threading.Event()
        super().__init__(address, _Handler)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        host = host.decode() if isinstance(host, bytes) else str(host)
        shown = f"[{host}]" if ":" in host else host
        return f"http://{shown}:{port}/"

    def server_close(self) -> None:
        super().server_close()
        self._closing.set()  # a clip being cut stops at its next frame
        with self._clip_lock:
            self._clip_dir.cleanup()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hung up is routine (debug log); anything else is logged with its traceback."""
        exc = sys.exc_info()[1]
        if isinstance(exc, _DISCONNECTS):
            logger.debug("%s went away: %s", client_address, exc)
            return
        logger.error("error while serving %s", client_address, exc_info=True)

    def warm(self) -> threading.Thread:
        """Compute the episode list and the first episode's payload in the background, before a browser asks."""

        def work() -> None:
            try:
                episodes = self.data.summary()["episodes"]
                if episodes:
                    self.data.episode(episodes[0]["episode_index"], self.video_source)
            except SteerableError as exc:  # the request that needs it reports the error
                logger.debug("warm-up stopped: %s", exc)

        thread = threading.Thread(target=work, name="steerable-view-warm", daemon=True)
        thread.start()
        return thread

    def video_source(self, camera: str, ep: EpisodeMeta) -> tuple[str, float]:
        path = self.data.ds.video_path(camera, ep)
        if not path.is_file():
            raise SteerableError(f"video file {path.relative_to(self.root)} is missing")
        if browser_playable(path):
            rel = path.relative_to(self.root).as_posix()
            return "files/" + quote(rel), ep.videos[camera].from_timestamp
        return f"clips/{ep.episode_index}/{quote(camera, safe='')}.mp4", 0.0

    def clip(self, episode_index: int, camera: str) -> Path:
        """The H.264 clip of one episode's camera, cut on first request."""
        ep = self.data.ds.episode(episode_index)
        if camera not in self.data.ds.camera_keys or camera not in ep.videos:
            raise ConfigError(f"episode {episode_index} has no camera {camera!r}")
        dst = Path(self._clip_dir.name) / f"{episode_index}-{quote(camera, safe='')}.mp4"
        with self._clip_lock:
            if self._closing.is_set():
                raise ClipStopped("the viewer is stopping")
            if not dst.is_file():
                span = ep.videos[camera]
                end = span.from_timestamp + ep.length / self.data.ds.fps
                cut_clip(self.data.ds.video_path(camera, ep), dst, span.from_timestamp, end, self.data.ds.fps,
                         stop=self._closing)
        return dst


def make_server(data: ViewerData, host: str = "127.0.0.1", port: int = 8000) -> ViewerServer:
    """Bind the viewer to host:port (port 0: any free port); a busy port is a one-line error."""
    try:
        return ViewerServer((host, port), data)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise ConfigError(f"port {port} on {host} is already in use; pass another --port (or 0 for any)") from exc
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc


class _Handler(BaseHTTPRequestHandler):
    server: ViewerServer
    protocol_version = "HTTP/1.1"
    server_version = "steerable-view"
    # TCP_NODELAY: a reply goes out as its headers and then its body; with Nagle's algorithm the body
    # waits for the client to ACK the headers, which a kept-alive connection delays by up to 40 ms
    # (measured: each script, JSON and video request after a connection's first took ~50 ms, not ~5).
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("%s " + format, self.address_string(), *args)

    def do_HEAD(self) -> None:
        self._dispatch(head=True)

    def do_GET(self) -> None:
        self._dispatch(head=False)

    def _read_only(self) -> None:
        self._send_bytes(b"read-only viewer: only GET and HEAD\n", "text/plain", HTTPStatus.METHOD_NOT_ALLOWED,
                         extra={"Allow": "GET, HEAD"})

    do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _read_only

    # -- routing ------------------------------------------------------------------------------
    def _dispatch(self, *, head: bool) -> None:
        self._head = head
        url = urlsplit(self.path)
        path = url.path
        try:
            if path in ("/", "/index.html"):
                self._send_bytes(index_html().encode(), "text/html; charset=utf-8")
            elif path.startswith("/assets/") and unquote(path[len("/assets/"):]) in ASSET_NAMES:
                name = unquote(path[len("/assets/"):])
                self._send_bytes(asset_bytes(name), mimetypes.guess_type(name)[0] or "application/octet-stream")
            elif path == "/api/dataset":
                self._send_json(self.server.data.summary())
            elif path.startswith("/api/episodes/"):
                index = _int(path[len("/api/episodes/"):])
                if index is None:
                    return self._not_found()
                self._send_json(self.server.data.episode(index, self.server.video_source))
            elif path == "/api/render":
                self._render(parse_qs(url.query))
            elif path.startswith("/files/"):
                target = resolve_under(self.server.root, path[len("/files/"):])
                if target is None:
                    return self._not_found()
                self._send_file(target)
            elif path.startswith("/clips/"):
                self._send_clip(path[len("/clips/"):])
            else:
                self._not_found()
        except _DISCONNECTS:
            logger.debug("client went away during %s", self.path)
        except ClipStopped:
            logger.debug("stopped while cutting the clip of %s", self.path)
        except SteerableError as exc:
            self._send_json({"error": str(exc)}, HTTPStatus.BAD_REQUEST)

    def _render(self, query: dict[str, list[str]]) -> None:
        recipe = (query.get("recipe") or [""])[0]
        episode = _int((query.get("episode") or [""])[0])
        frame = _int((query.get("frame") or [""])[0])
        if episode is None or frame is None:
            raise ConfigError("render needs recipe, episode and frame")
        try:
            self._send_json(self.server.data.recipes.at_frame(recipe, episode, frame))
        except KeyError:
            self._not_found()

    def _send_clip(self, rest: str) -> None:
        episode, _, name = rest.partition("/")
        index = _int(episode)
        if index is None or not name.endswith(".mp4"):
            return self._not_found()
        self._send_file(self.server.clip(index, unquote(name[: -len(".mp4")])))

    # -- replies ------------------------------------------------------------------------------
    def _not_found(self) -> None:
        self._send_bytes(b"not found\n", "text/plain", HTTPStatus.NOT_FOUND)

    def _send_json(self, body: Any, status: HTTPStatus = HTTPStatus.OK) -> None:
        data = json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()
        self._send_bytes(data, "application/json", status)

    def _send_bytes(
        self, data: bytes, kind: str, status: HTTPStatus = HTTPStatus.OK, extra: dict[str, str] | None = None
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-cache")
        for key, value in (extra or {}).items():
            self.send_header(key, value)
        self.end_headers()
        if not getattr(self, "_head", False):
            self.wfile.write(data)

    def _send_file(self, path: Path) -> None:
        size = path.stat().st_size
        wanted = parse_range(self.headers.get("Range"), size)
        if wanted is False:
            self.send_response(HTTPStatus.REQUESTED_RANGE_NOT_SATISFIABLE)
            self.send_header("Content-Range", f"bytes */{size}")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        start, end = wanted if isinstance(wanted, tuple) else (0, size - 1)
        length = max(0, end - start + 1)
        self.send_response(HTTPStatus.PARTIAL_CONTENT if isinstance(wanted, tuple) else HTTPStatus.OK)
        self.send_header("Content-Type", mimetypes.guess_type(path.name)[0] or "application/octet-stream")
        self.send_header("Content-Length", str(length))
        self.send_header("Accept-Ranges", "bytes")
        if isinstance(wanted, tuple):
            self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
        self.end_headers()
        if not self._head and length:
            with path.open("rb") as f:
                copy_range(f, self.wfile, start, length)


def _int(text: str) -> int | None:
    return int(text) if text.isdigit() else None
