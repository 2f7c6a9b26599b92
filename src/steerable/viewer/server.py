"""The local viewer server: a Starlette app on uvicorn, confined to the dataset; read-only unless --edit.

Routes (GET and HEAD): `/` the app; `/assets/*` its scripts and styles (package data); `/api/dataset`,
`/api/episodes/N`, `/api/render?recipe=R&episode=N&frame=F`, `/api/uncertainty`, `/api/revisions`,
`/api/revisions/N` JSON; `/files/REL` dataset files with byte ranges; `/clips/N/CAMERA.mp4` H.264 clips
of videos a browser cannot play as stored. With an edit session (`steerable view --edit`) the write
routes of `steerable.viewer.edit` are added (POST only, each checked for the session's token). Every
request, read or write, first passes `steerable.viewer.hosts` (its `Host` must name this server, and
an API request's `Origin` must be its own: DNS rebinding).

`/files/` paths are resolved from the raw request target (decoded once, by `resolve_under`), so an
encoded `..` is refused as a plain one is. Work that blocks (reading parquet, cutting clips, saving)
runs on the thread pool. A browser dropping a connection (a video element abandons a range request
when it seeks) is routine for uvicorn; any other error in a request is logged here with its
traceback and answered 500.
"""

from __future__ import annotations

import asyncio
import logging
import mimetypes
import socket
import threading
from collections.abc import Awaitable, Callable, MutableMapping
from http import HTTPStatus
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from steerable.dataset import EpisodeMeta
from steerable.errors import ConfigError, SteerableError, explain_os_error
from steerable.scratch import ScratchFolder
from steerable.viewer.assets import ASSET_NAMES, asset_bytes, index_html
from steerable.viewer.clips import ClipStopped, browser_playable, cut_clip
from steerable.viewer.files import file_response, resolve_under
from steerable.viewer.hosts import HostCheck, HostGuard
from steerable.viewer.listen import listen, nodelay_protocol
from steerable.viewer.replies import json_response
from steerable.viewer.site import ViewerData

if TYPE_CHECKING:  # imported where an edit session starts: plain viewing loads no write path
    from steerable.viewer.edit import EditSession

__all__ = ["ViewerServer", "json_response", "make_server"]

CLIP_PREFIX = "steerable-view-"  # the clip folders in the system temp folder (steerable.scratch)

logger = logging.getLogger(__name__)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

_READ_METHODS = ["GET", "HEAD"]
# Graceful shutdown waits this long for requests in flight (a video being streamed) before closing them.
_SHUTDOWN_GRACE_S = 2


def _text(text: str, status: int, headers: dict[str, str] | None = None) -> Response:
    headers = {"Cache-Control": "no-cache", **(headers or {})}
    return Response(text.encode(), status, media_type="text/plain", headers=headers)


def _not_found() -> Response:
    return _text("not found\n", HTTPStatus.NOT_FOUND)


def _int(text: str) -> int | None:
    return int(text) if text.isdigit() else None


class ViewerServer:
    """The viewer bound to a socket: `serve_forever` runs it, `shutdown` (another thread) stops it.

    Holds the dataset's `ViewerData`, a cache folder for transcoded clips and, with `--edit`, the
    `EditSession` (its token and the dataset's writer lock). `host` is the address the user asked
    for (a name is answered as `Host` too).
    """

    def __init__(
        self, sock: socket.socket, data: ViewerData, edit: EditSession | None = None, *, host: str = "127.0.0.1"
    ) -> None:
        self.data = data
        self.root = data.ds.root
        self.socket = sock
        self.edit = edit
        self._clip_dir = ScratchFolder(CLIP_PREFIX)  # removes those of viewers killed with SIGKILL first
        self._clip_lock = threading.Lock()
        self._closing = threading.Event()
        self._thread: threading.Thread | None = None
        self.app = _Guard(HostGuard(self._build_app(), HostCheck(host, self.server_address[0])))
        import uvicorn

        config = uvicorn.Config(
            self.app, http=nodelay_protocol(), log_config=None, access_log=False, lifespan="off",
            timeout_graceful_shutdown=_SHUTDOWN_GRACE_S, server_header=False, date_header=False,
        )
        self._uvicorn = uvicorn.Server(config)

    @property
    def server_address(self) -> tuple[str, int]:
        host, port = self.socket.getsockname()[:2]
        return str(host), int(port)

    @property
    def url(self) -> str:
        """The page's address; in edit mode with the session's token in the fragment (never sent in requests)."""
        host, port = self.server_address
        shown = f"[{host}]" if ":" in host else host
        base = f"http://{shown}:{port}/"
        return base + f"#token={self.edit.token}" if self.edit is not None else base

    # -- running --------------------------------------------------------------------------------
    def serve_forever(self) -> None:
        """Serve until `shutdown` (uvicorn in this thread; it installs no signal handler off the main thread)."""
        self._thread = threading.current_thread()
        self._uvicorn.run(sockets=[self.socket])

    def start(self) -> threading.Thread:
        """`serve_forever` on a daemon thread; returns once the server accepts connections."""
        thread = threading.Thread(target=self.serve_forever, name="steerable-view", daemon=True)
        thread.start()
        while not self._uvicorn.started and thread.is_alive():
            thread.join(0.01)
        return thread

    def shutdown(self) -> None:
        self._uvicorn.should_exit = True

    def server_close(self) -> None:
        """Stop serving (waiting for the server's own shutdown), stop clips, remove them, drop the lock."""
        self._uvicorn.should_exit = True
        self._closing.set()  # a clip being cut stops at its next frame
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(_SHUTDOWN_GRACE_S + 3)
        with self._clip_lock:
            self._clip_dir.cleanup()
        if self.edit is not None:
            self.edit.close()
        self.socket.close()

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

    # -- data -----------------------------------------------------------------------------------
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
        dst = self._clip_dir.path / f"{episode_index}-{quote(camera, safe='')}.mp4"
        with self._clip_lock:
            if self._closing.is_set():
                raise ClipStopped("the viewer is stopping")
            if not dst.is_file():
                span = ep.videos[camera]
                end = span.from_timestamp + ep.length / self.data.ds.fps
                cut_clip(self.data.ds.video_path(camera, ep), dst, span.from_timestamp, end, self.data.ds.fps,
                         stop=self._closing)
        return dst

    # -- the app --------------------------------------------------------------------------------
    def _build_app(self) -> Starlette:
        routes = [
            Route("/", self._index, methods=_READ_METHODS),
            Route("/index.html", self._index, methods=_READ_METHODS),
            Route("/assets/{name}", self._asset, methods=_READ_METHODS),
            Route("/api/dataset", self._dataset, methods=_READ_METHODS),
            Route("/api/episodes/{index}", self._episode, methods=_READ_METHODS),
            Route("/api/render", self._render, methods=_READ_METHODS),
            Route("/api/uncertainty", self._uncertainty, methods=_READ_METHODS),
            Route("/api/revisions", self._revisions, methods=_READ_METHODS),
            Route("/api/revisions/{rev}", self._revision, methods=_READ_METHODS),
            Route("/files/{rest:path}", self._file, methods=_READ_METHODS),
            Route("/clips/{episode}/{name}", self._clip, methods=_READ_METHODS),
        ]
        if self.edit is not None:
            routes = self.edit.routes(self) + routes
        handlers = {HTTPStatus.METHOD_NOT_ALLOWED.value: self._method_not_allowed,
                    HTTPStatus.NOT_FOUND.value: self._http_not_found}
        return Starlette(routes=routes, exception_handlers=handlers)

    async def _method_not_allowed(self, request: Request, exc: Exception) -> Response:
        if self.edit is None:
            return _text("read-only viewer: only GET and HEAD\n", HTTPStatus.METHOD_NOT_ALLOWED, {"Allow": "GET, HEAD"})
        allow = (getattr(exc, "headers", None) or {}).get("Allow", "GET, HEAD")
        return _text("method not allowed here\n", HTTPStatus.METHOD_NOT_ALLOWED, {"Allow": allow})

    async def _http_not_found(self, request: Request, exc: Exception) -> Response:
        return _not_found()

    async def call(self, fn: Callable[..., Any], *args: Any) -> Response:
        """Run blocking `fn(*args)` on the thread pool; a SteerableError is a 400 with its message."""
        try:
            result = await run_in_threadpool(fn, *args)
        except ClipStopped:
            logger.debug("stopped while cutting a clip")
            return _text("the viewer is stopping\n", HTTPStatus.SERVICE_UNAVAILABLE)
        except KeyError:
            return _not_found()
        except SteerableError as exc:
            return json_response({"error": str(exc)}, HTTPStatus.BAD_REQUEST)
        return result if isinstance(result, Response) else json_response(result)

    async def _index(self, request: Request) -> Response:
        return Response(index_html().encode(), media_type="text/html; charset=utf-8",
                        headers={"Cache-Control": "no-cache"})

    async def _asset(self, request: Request) -> Response:
        name = unquote(request.path_params["name"])
        if name not in ASSET_NAMES:
            return _not_found()
        kind = mimetypes.guess_type(name)[0] or "application/octet-stream"
        return Response(asset_bytes(name), media_type=kind, headers={"Cache-Control": "no-cache"})

    async def _dataset(self, request: Request) -> Response:
        def summary() -> dict[str, Any]:
            body = dict(self.data.summary())
            body["edit"] = self.edit is not None
            return body

        return await self.call(summary)

    async def _episode(self, request: Request) -> Response:
        index = _int(request.path_params["index"])
        if index is None:
            return _not_found()
        return await self.call(self.data.episode, index, self.video_source)

    async def _render(self, request: Request) -> Response:
        q = request.query_params
        episode, frame = _int(q.get("episode", "")), _int(q.get("frame", ""))
        if episode is None or frame is None:
            return json_response({"error": "render needs recipe, episode and frame"}, HTTPStatus.BAD_REQUEST)
        return await self.call(self.data.recipes.at_frame, q.get("recipe", ""), episode, frame)

    async def _uncertainty(self, request: Request) -> Response:
        return await self.call(self.data.uncertainty)

    async def _revisions(self, request: Request) -> Response:
        return await self.call(self.data.revisions)

    async def _revision(self, request: Request) -> Response:
        rev = _int(request.path_params["rev"])
        if rev is None:
            return _not_found()
        return await self.call(self.data.revision, rev)

    async def _file(self, request: Request) -> Response:
        raw = request.scope.get("raw_path") or request.scope["path"].encode()
        rest = raw.decode("latin-1").split("?", 1)[0][len("/files/"):]
        target = resolve_under(self.root, rest)
        if target is None:
            return _not_found()
        return file_response(request, target)

    async def _clip(self, request: Request) -> Response:
        index, name = _int(request.path_params["episode"]), unquote(request.path_params["name"])
        if index is None or not name.endswith(".mp4"):
            return _not_found()

        def cut() -> Path:
            return self.clip(index, name[: -len(".mp4")])

        try:
            path = await run_in_threadpool(cut)
        except ClipStopped:
            logger.debug("stopped while cutting the clip of %s", request.url.path)
            return _text("the viewer is stopping\n", HTTPStatus.SERVICE_UNAVAILABLE)
        except SteerableError as exc:
            return json_response({"error": str(exc)}, HTTPStatus.BAD_REQUEST)
        return file_response(request, path)


class _Guard:
    """Outermost ASGI layer: an error no handler caught is logged with its traceback and answered 500
    (or the connection closed, once a reply has started), instead of reaching uvicorn's log; an
    OSError before the reply (a disk failing under a read) is one warning line and a 500 saying why."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = False

        async def tracked(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, tracked)
        except asyncio.CancelledError:
            logger.debug("%s %s: cancelled", scope.get("method"), scope.get("path"))
            raise
        except OSError as exc:
            if started:  # the client went away mid-reply
                logger.debug("%s %s: %s", scope.get("method"), scope.get("path"), exc)
                return
            # Before any reply the client is still there: a file system error (a disk failing) it is told.
            reason = explain_os_error(exc)
            logger.warning("%s %s: %s", scope.get("method"), scope.get("path"), reason)
            if scope.get("type") == "http":
                await _text(f"{reason}\n", HTTPStatus.INTERNAL_SERVER_ERROR)(scope, receive, send)
        except Exception:
            logger.error("error while serving %s %s", scope.get("method"), scope.get("path"), exc_info=True)
            if not started and scope.get("type") == "http":
                reply = _text("internal error (see the viewer's log)\n", HTTPStatus.INTERNAL_SERVER_ERROR)
                await reply(scope, receive, send)


def make_server(data: ViewerData, host: str = "127.0.0.1", port: int = 8000, *, edit: bool = False) -> ViewerServer:
    """Bind the viewer to host:port (port 0: any free port); a busy port is a one-line error.

    `edit`: add the write routes, behind a per-session token, holding the dataset's writer lock
    (another writer running is a one-line error too).
    """
    sock = listen(host, port)
    session = None
    if edit:
        from steerable.viewer.edit import EditSession

        try:
            session = EditSession(data)
        except BaseException:
            sock.close()
            raise
    try:
        return ViewerServer(sock, data, session, host=host)
    except BaseException:
        if session is not None:
            session.close()
        sock.close()
        raise
