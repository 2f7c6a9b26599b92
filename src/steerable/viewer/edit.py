"""`steerable view --edit`: the write routes of the viewer, safe by default.

- One writer per dataset: the session holds the dataset's writer lock (`steerable.dataset.lock`,
  the one `annotate` takes) from start to stop; a second writer is refused with one line.
- Every write is a POST carrying the session's token (`X-Steerable-Token`, printed in the URL's
  fragment, which browsers never send): a page of another site cannot read it, so cannot write. A
  write whose `Origin` is another site, or whose `Host` does not name this server (DNS rebinding),
  never gets here: `steerable.viewer.hosts` refuses it, as it refuses such reads.
- Bodies are JSON, at most `MAX_BODY` bytes (refused before reading more), and checked against a
  schema (unknown keys refused); the rows in them are the client's JSON objects until the save checks
  them with the validator `annotate` uses (`steerable.dataset.review.rows_to_save`): every problem
  comes back, one message each, and nothing is written unless all rows are valid.
- Writes go through `steerable.dataset.review` (the folder commit: a kill mid-save leaves the old or
  the new dataset; each save a revision), one at a time. A save the disk refuses (full, read-only,
  no permission) answers its reason as JSON (507 for a full disk, else 503) and logs it as a warning
  in the terminal.

Routes: `POST /api/episodes/N/language` (rows, review status, the edit operations made),
`POST /api/episodes/N/status`, `POST /api/revisions/N/restore`.
"""

from __future__ import annotations

import errno
import hmac
import logging
import secrets
import threading
from collections.abc import Callable
from http import HTTPStatus
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route

from steerable.dataset import EpisodeMeta
from steerable.dataset.commit import recover_folder
from steerable.dataset.layout import WORK_DIR_NAME
from steerable.dataset.lock import RunLock
from steerable.dataset.review import restore_revision, save_episode
from steerable.dataset.review_records import ReviewStatus
from steerable.dataset.revisions import latest_revision
from steerable.errors import LanguageSchemaError, explain_os_error, os_cause
from steerable.viewer.replies import json_response
from steerable.viewer.site import ViewerData

__all__ = ["MAX_BODY", "TOKEN_HEADER", "EditHost", "EditSession"]

logger = logging.getLogger(__name__)

MAX_BODY = 8 * 1024 * 1024  # an episode's whole language is a few hundred KB at most
TOKEN_HEADER = "x-steerable-token"
WRITER = "steerable view --edit"


class _TooLarge(Exception):
    pass


# A row as the page sent it: a JSON object, checked by the save (a `RowIn` of `steerable.language.rows`).
JsonRow = dict[str, JsonValue]


class EventIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    t: float
    row: JsonRow


class SaveBody(BaseModel):
    """A save: the episode's whole language as the page holds it, or only a review status."""

    model_config = ConfigDict(extra="forbid")
    version: str | None = Field(None, max_length=64, description="the rows' fingerprint when the page read them")
    persistent: list[JsonRow] | None = Field(None, max_length=100_000)
    events: list[EventIn] | None = Field(None, max_length=100_000)
    status: ReviewStatus | None = None
    ops: dict[str, int] = Field(default_factory=dict, max_length=32)
    message: str = Field("", max_length=500)


class StatusBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    status: ReviewStatus


class RestoreBody(BaseModel):
    model_config = ConfigDict(extra="forbid")


class EditHost(Protocol):
    """What the write routes use of the server that mounts them (`steerable.viewer.server.ViewerServer`,
    which imports this module: the server is passed in, not imported)."""

    def video_source(self, camera: str, ep: EpisodeMeta) -> tuple[str, float]: ...

    async def call(self, fn: Callable[..., Any], *args: Any) -> Response: ...


def _refuse(status: int, error: str, **extra: Any) -> Response:
    return json_response({"error": error, **extra}, status)


class EditSession:
    """The token, the writer lock and the write routes of one `--edit` run on `data`."""

    def __init__(self, data: ViewerData) -> None:
        self.data = data
        self.ds = data.ds
        self.token = secrets.token_urlsafe(24)
        self._lock = RunLock.acquire(self.ds.root / WORK_DIR_NAME, self.ds.root, WRITER)
        self._write = threading.Lock()
        self._closed = False

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._lock.release()

    def routes(self, server: EditHost) -> list[Route]:
        self.server = server
        return [
            Route("/api/episodes/{index}/language", self._save, methods=["POST"]),
            Route("/api/episodes/{index}/status", self._status, methods=["POST"]),
            Route("/api/revisions/{rev}/restore", self._restore, methods=["POST"]),
        ]

    # -- checks ---------------------------------------------------------------------------------
    def _forbidden(self, request: Request) -> Response | None:
        """Why this write request is refused (403 or 415), or None (Host and Origin: `viewer.hosts`)."""
        given = request.headers.get(TOKEN_HEADER, "")
        if not hmac.compare_digest(given.encode(), self.token.encode()):
            return _refuse(HTTPStatus.FORBIDDEN,
                           "this write needs the session's token (open the URL `steerable view --edit` printed)")
        if request.headers.get("content-type", "").split(";")[0].strip() != "application/json":
            return _refuse(HTTPStatus.UNSUPPORTED_MEDIA_TYPE, "a write sends JSON (Content-Type: application/json)")
        return None

    async def _body(self, request: Request) -> bytes:
        declared = request.headers.get("content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > MAX_BODY):
            raise _TooLarge
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > MAX_BODY:
                raise _TooLarge
            chunks.append(chunk)
        return b"".join(chunks)

    async def _parse(self, request: Request, model: type[BaseModel]) -> BaseModel | Response:
        refused = self._forbidden(request)
        if refused is not None:
            return refused
        try:
            raw = await self._body(request)
        except _TooLarge:
            return _refuse(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"the body is over {MAX_BODY // (1024 * 1024)} MiB")
        except ClientDisconnect:
            return _refuse(HTTPStatus.BAD_REQUEST, "the client went away")
        try:
            return model.model_validate_json(raw or b"{}")
        except ValidationError as exc:
            problems = [f"{'.'.join(str(p) for p in e['loc']) or 'body'}: {e['msg']}" for e in exc.errors()[:20]]
            return _refuse(HTTPStatus.UNPROCESSABLE_ENTITY, f"the body does not match the schema: {problems[0]}",
                           problems=problems)

    def _episode_index(self, request: Request) -> int | None:
        text = request.path_params["index"]
        if not text.isdigit():
            return None
        index = int(text)
        viewed = self.data.episode_indices
        known = {e.episode_index for e in self.ds.episodes}
        return index if index in known and (viewed is None or index in viewed) else None

    # -- routes ---------------------------------------------------------------------------------
    async def _save(self, request: Request) -> Response:
        body = await self._parse(request, SaveBody)
        if isinstance(body, Response):
            return body
        assert isinstance(body, SaveBody)
        index = self._episode_index(request)
        if index is None:
            return _refuse(HTTPStatus.NOT_FOUND, "no such episode among the episodes being edited")
        ops = {k: v for k, v in body.ops.items() if v > 0}
        events = None if body.events is None else [(e.t, e.row) for e in body.events]
        return await self.server.call(self._save_now, index, body, events, ops)

    def _save_now(self, index: int, body: SaveBody, events: list[tuple[float, JsonRow]] | None,
                  ops: dict[str, int]) -> Response | dict[str, Any]:
        with self._write:
            if body.version is not None and (body.persistent is not None or events is not None):
                stored = self.data.episode(index, self.server.video_source)
                if body.version != stored["version"]:
                    return _refuse(HTTPStatus.CONFLICT, f"episode {index} changed since this page read it; reload it")
            before = latest_revision(self.ds.root)
            try:  # a column not sent keeps its stored rows; the rows are checked there, once
                revision = save_episode(self.ds, index, body.persistent, events, status=body.status, ops=ops,
                                        by=WRITER, message=body.message)
            except LanguageSchemaError as exc:
                return _invalid(exc)
            except OSError as exc:  # WriteError too: a full or read-only disk, no permission
                return self._not_written(f"episode {index}", before, exc)
            self.data.invalidate(index)
            return {"revision": revision.to_json() if revision else None,
                    "episode": self.data.episode(index, self.server.video_source)}

    async def _status(self, request: Request) -> Response:
        body = await self._parse(request, StatusBody)
        if isinstance(body, Response):
            return body
        assert isinstance(body, StatusBody)
        index = self._episode_index(request)
        if index is None:
            return _refuse(HTTPStatus.NOT_FOUND, "no such episode among the episodes being edited")
        return await self.server.call(self._save_now, index, SaveBody(status=body.status), None, {})

    async def _restore(self, request: Request) -> Response:
        body = await self._parse(request, RestoreBody)
        if isinstance(body, Response):
            return body
        text = request.path_params["rev"]
        if not text.isdigit():
            return _refuse(HTTPStatus.NOT_FOUND, "no such revision")
        return await self.server.call(self._restore_now, int(text))

    def _restore_now(self, rev: int) -> Response | dict[str, Any]:
        with self._write:
            before = latest_revision(self.ds.root)
            try:
                revision = restore_revision(self.ds, rev, by=WRITER)
            except OSError as exc:
                return self._not_written(f"going back to revision {rev}", before, exc)
            self.data.invalidate()
            return {"revision": revision.to_json() if revision else None}

    def _not_written(self, what: str, before: int, exc: OSError) -> Response:
        """The reply to a write the file system refused, logged in the terminal too."""
        cause = os_cause(exc)
        try:  # a commit whose switch failed after its commit point is finished here, and then it is saved
            recover_folder(self.ds.root)
            saved = latest_revision(self.ds.root) != before
        except OSError:
            saved = False
        if saved:
            self.data.invalidate()
        if saved or cause is None:  # then the error says it all (a WriteError of the commit)
            message = f"{what}: {exc}"
        else:
            reason = explain_os_error(cause, paths=False)
            message = f"{what}: could not write {self.ds.root}: {reason}; nothing was saved"
        logger.warning("steerable view --edit: %s", message)
        full = cause is not None and cause.errno in (errno.ENOSPC, errno.EDQUOT)
        return _refuse(HTTPStatus.INSUFFICIENT_STORAGE if full else HTTPStatus.SERVICE_UNAVAILABLE, message)


def _invalid(exc: LanguageSchemaError) -> Response:
    """The one reply to rows that break the schema: the message's first line (the count and the first
    problem), and every problem as the error carries it."""
    head = str(exc).splitlines()[0].removesuffix("; fix them and retry")
    return _refuse(HTTPStatus.UNPROCESSABLE_ENTITY, f"{head}; nothing was saved", problems=list(exc.problems))

