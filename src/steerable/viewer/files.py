"""Serving dataset files safely: paths confined to one root, and HTTP byte ranges."""

from __future__ import annotations

import re
from pathlib import Path
from typing import IO, Any
from urllib.parse import unquote

__all__ = ["CHUNK", "copy_range", "parse_range", "resolve_under"]

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


def copy_range(src: IO[bytes], dst: Any, start: int, length: int) -> None:
    """Stream `length` bytes of `src` from `start` to `dst` in fixed chunks (never the whole file)."""
    src.seek(start)
    left = length
    while left > 0:
        chunk = src.read(min(CHUNK, left))
        if not chunk:
            break
        dst.write(chunk)
        left -= len(chunk)
