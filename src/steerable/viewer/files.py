"""Serving dataset files safely: paths confined to one root, and HTTP byte ranges (streamed replies)."""

from __future__ import annotations

import mimetypes
import re
from collections.abc import Iterator
from http import HTTPStatus
from pathlib import Path
from urllib.parse import unquote

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

__all__ = ["CHUNK", "file_response", "parse_range", "read_range", "resolve_under"]

CHUNK = 256 * 1024
_RANGE = re.compile(r"^bytes=(\d*)-(\d*)$")


def resolve_under(root: Path, url_path: str) -> Path | None:
    """The regular file that `url_path` (percent-encoded, relative) names inside `root`, or None.

    Refused: `..` or `.` segments (also percent-encoded ones), absolute paths, backslashes, NUL bytes,
    and anything whose real path (symlinks followed) leaves `root`.
    """
    text = unquote(url_path)
    if not text or "\x00" in text or "\\" in text or text.startswith("/"):
        return None
    parts = text.split("/")
    if any(p in ("", ".", "..") for p in parts):
        return None
    base = root.resolve()
    try:
        path = base.joinpath(*parts).resolve(strict=True)
    except (OSError, RuntimeError):
        return None
    if not path.is_relative_to(base) or not path.is_file():
        return None
    return path


def parse_range(header: str | None, size: int) -> tuple[int, int] | None | bool:
    """The inclusive byte range a `Range` header asks for within `size` bytes.

    None: no usable single range (serve the whole file); False: unsatisfiable (416).
    """
    if not header:
        return None
    m = _RANGE.match(header.strip())
    if m is None:
        return None  # multiple ranges or another unit: a full reply is allowed
    first, last = m.groups()
    if not first and not last:
        return None
    if not first:  # suffix range: the last N bytes
        n = int(last)
        if n == 0 or size == 0:
            return False
        return max(0, size - n), size - 1
    start = int(first)
    if last and int(last) < start:
        return None  # not a valid range at all: ignored, the whole file is sent (RFC 9110 14.2)
    end = size - 1 if not last else min(int(last), size - 1)
    if start >= size:
        return False
    return start, end


def read_range(path: Path, start: int, length: int) -> Iterator[bytes]:
    """`length` bytes of `path` from `start`, in fixed chunks (never the whole file)."""
    with path.open("rb") as f:
        f.seek(start)
        left = length
        while left > 0:
            chunk = f.read(min(CHUNK, left))
            if not chunk:
                break
            left -= len(chunk)
            yield chunk


def file_response(request: Request, path: Path) -> Response:
    """The file, or the single byte range the request asks for, streamed in fixed chunks (Starlette
    reads the generator on its thread pool)."""
    size = path.stat().st_size
    wanted = parse_range(request.headers.get("range"), size)
    if wanted is False:
        return Response(b"", HTTPStatus.REQUESTED_RANGE_NOT_SATISFIABLE, headers={"Content-Range": f"bytes */{size}"})
    start, end = wanted if isinstance(wanted, tuple) else (0, size - 1)
    length = max(0, end - start + 1)
    headers = {
        "Content-Length": str(length),
        "Accept-Ranges": "bytes",
        "Cache-Control": "no-cache",
    }
    if isinstance(wanted, tuple):
        headers["Content-Range"] = f"bytes {start}-{end}/{size}"
    status = HTTPStatus.PARTIAL_CONTENT if isinstance(wanted, tuple) else HTTPStatus.OK
    kind = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
    if request.method == "HEAD" or not length:
        return Response(b"", status, headers=headers, media_type=kind)
    return StreamingResponse(read_range(path, start, length), status, headers=headers, media_type=kind)
