"""Scratch folders that outlive no process: each is locked by its owner while it runs, and the next
one made with the same prefix removes those whose owner died, however it died (SIGKILL included).

A folder is `<prefix><pid>-<random>` holding `owner.lock`, which its process keeps locked (flock)
while it lives: the kernel drops the lock when the process dies, so a later process can tell a dead
owner's folder from a live one's, across PID namespaces too. A folder whose lock file is not there
yet (its owner is creating it) counts as live while its PID does. Folders of other users, and names
of another shape (an older version's), are left alone. Users: the viewer's clips
(`steerable-view-`, in the system temp folder) and a revision's checkout (`.<dataset>.steerable-rev-`,
beside the dataset).
"""

from __future__ import annotations

import contextlib
import glob
import logging
import os
import re
import shutil
import tempfile
from pathlib import Path

__all__ = ["ScratchFolder", "remove_stale"]

logger = logging.getLogger(__name__)

_LOCK = "owner.lock"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def _stale(path: Path, prefix: str) -> bool:
    import fcntl  # POSIX only, like the folder commit's locks

    match = re.fullmatch(rf"{re.escape(prefix)}(\d+)-[^/]+", path.name)
    if match is None or path.is_symlink() or not path.is_dir() or path.stat().st_uid != os.getuid():
        return False
    try:
        fd = os.open(path / _LOCK, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return not _pid_alive(int(match.group(1)))
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:  # held: its owner runs
        return False
    finally:
        os.close(fd)
    return True


def remove_stale(prefix: str, base: Path | str | None = None) -> list[Path]:
    """Remove the `prefix` scratch folders of dead owners under `base` (default: the system temp
    folder); returns them."""
    removed = []
    for path in sorted(Path(base or tempfile.gettempdir()).glob(f"{glob.escape(prefix)}*")):
        try:
            stale = _stale(path, prefix)
        except OSError:  # gone meanwhile, or unreadable: not ours to judge
            continue
        if stale:
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    if removed:
        logger.info("removed %d scratch folder(s) of processes that were killed: %s", len(removed),
                    ", ".join(p.name for p in removed))
    return removed


class ScratchFolder:
    """A new `prefix` scratch folder in `base` (default: the system temp folder), locked as this
    process's while it lives; stale ones of the same prefix are removed first. Raises OSError when
    `base` cannot take it (nothing is left behind)."""

    def __init__(self, prefix: str, base: Path | str | None = None) -> None:
        import fcntl

        remove_stale(prefix, base)
        self.path = Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-", dir=base))
        try:
            self._fd: int | None = os.open(self.path / _LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            fcntl.flock(self._fd, fcntl.LOCK_EX)
        except OSError:
            shutil.rmtree(self.path, ignore_errors=True)
            raise

    def cleanup(self) -> None:
        """Remove the folder (idempotent)."""
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None
        shutil.rmtree(self.path, ignore_errors=True)
