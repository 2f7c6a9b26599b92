"""Atomic file replacement: write to a temp file beside the target, fsync, rename into place.

A crash at any instant leaves the target either as it was or fully new, never half-written. The
new file gets the mode of the file it replaces, or the umask's default for a new file (not the
0600 of a temp file). Whole folders are committed by `steerable.dataset.commit`.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import glob
import json
import os
import stat
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from steerable.errors import WriteError, explain_os_error

__all__ = [
    "atomic_path",
    "atomic_write_bytes",
    "atomic_write_json",
    "check_writable",
    "current_umask",
    "exchange_paths",
    "fsync_dir",
    "remove_stale_temps",
]

_RENAME_EXCHANGE, _AT_FDCWD = 2, -100  # renameat2's flag and "relative to the working directory"


def fsync_dir(directory: Path) -> None:
    """Make a rename inside `directory` durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def remove_stale_temps(target: Path) -> int:
    """Delete the temp files that killed `atomic_path` writes left beside `target`; returns how many."""
    target = Path(target)
    pattern = f".{glob.escape(target.name)}.*.tmp"  # the names atomic_path gives its temp files
    stale = list(target.parent.glob(pattern)) if target.parent.is_dir() else []
    for path in stale:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
    return len(stale)


@contextlib.contextmanager
def atomic_path(target: Path, *, durable: bool = True) -> Iterator[Path]:
    """Yield a temp path beside `target`; on clean exit fsync it and rename it over `target`.

    The caller writes the temp path with any library (pyarrow, json...). On error the temp file
    is removed and `target` is untouched. `durable=False` skips the fsyncs: the rename is still
    atomic for other processes, but a power loss may lose the new file; use it only for files whose
    integrity is verified on read (staging checks a hash and redoes work that does not match).
    """
    target = Path(target)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as exc:
        raise WriteError(f"could not write {target}: {explain_os_error(exc, paths=False)}") from exc
    tmp = Path(tmp_name)
    try:
        try:
            os.fchmod(fd, _mode_for(target))
        finally:
            os.close(fd)
        yield tmp
        if stat.S_IMODE(os.stat(tmp).st_mode) != (mode := _mode_for(target)):
            os.chmod(tmp, mode)  # the caller's library replaced the temp file with one of its own
        if durable:
            with open(tmp, "rb+") as fh:
                os.fsync(fh.fileno())
        os.replace(tmp, target)
        if durable:
            fsync_dir(target.parent)
    except BaseException as exc:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        if isinstance(exc, OSError) and not isinstance(exc, WriteError):
            raise WriteError(f"could not write {target}: {explain_os_error(exc, paths=False)}; "
                             "the previous file is intact") from exc
        raise


def current_umask() -> int:
    """The process umask, read without changing it where the system allows (Linux /proc)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _mode_for(target: Path) -> int:
    """The mode a new version of `target` gets: that of the file it replaces, else 0666 minus the umask."""
    try:
        return stat.S_IMODE(os.stat(target).st_mode)
    except OSError:
        return 0o666 & ~current_umask()


def atomic_write_bytes(target: Path, data: bytes, *, durable: bool = True) -> None:
    with atomic_path(target, durable=durable) as tmp:
        tmp.write_bytes(data)


def atomic_write_json(
    target: Path, obj: Any, *, default: Callable[[Any], Any] | None = None, durable: bool = True
) -> None:
    """Write JSON with LeRobot's formatting (indent 4) atomically."""
    text = json.dumps(obj, indent=4, ensure_ascii=False, default=default) + "\n"
    atomic_write_bytes(target, text.encode("utf-8"), durable=durable)


def check_writable(dest: Path | str, *, inside: bool = False, hint: str = "choose a writable location") -> None:
    """Raise WriteError now if writing `dest` must fail: it needs a writable folder to put it in.

    `inside=True`: `dest` is a folder to write files in (created if needed), not a path to replace.
    """
    dest = Path(dest).absolute()
    probe = dest if inside else dest.parent
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir():
        raise WriteError(f"cannot write {dest}: {probe} is a file, not a folder; choose another path")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise WriteError(f"cannot write {dest}: {probe} is read-only or not writable by you; {hint}")


@functools.cache
def _renameat2() -> Any:
    return getattr(ctypes.CDLL(None, use_errno=True), "renameat2", None)


def exchange_paths(a: Path, b: Path) -> bool:
    """Atomically swap two paths (Linux renameat2); False where the system cannot (or STEERABLE_NO_EXCHANGE)."""
    if not sys.platform.startswith("linux") or os.environ.get("STEERABLE_NO_EXCHANGE"):
        return False
    renameat2 = _renameat2()
    if renameat2 is None:
        return False
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP):
        return False
    raise OSError(code, os.strerror(code), str(b))
