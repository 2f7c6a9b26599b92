"""The viewer's scratch folder (re-encoded clips) in the system temp folder, and the cleaning of those
that viewers killed with SIGKILL left behind.

A folder is `steerable-view-<pid>-<random>` holding `owner.lock`, which its viewer keeps locked
(flock) while it runs: the kernel drops the lock when the process dies however it dies, so a later
viewer can tell a dead owner's folder from a live one's, across PID namespaces too. A folder whose
lock file is not there yet (its viewer is creating it) counts as live while its PID does. Folders of
other users, and names of another shape (an older version's), are left alone.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import tempfile
from pathlib import Path

__all__ = ["PREFIX", "ScratchFolder", "remove_stale"]

logger = logging.getLogger(__name__)

PREFIX = "steerable-view-"
_LOCK = "owner.lock"
_NAME = re.compile(rf"{re.escape(PREFIX)}(\d+)-[^/]+")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def _stale(path: Path) -> bool:
    import fcntl  # POSIX only, like the folder commit's locks

    match = _NAME.fullmatch(path.name)
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
    except OSError:  # held: its viewer runs
        return False
    finally:
        os.close(fd)
    return True


def remove_stale(base: Path | str | None = None) -> list[Path]:
    """Remove the scratch folders of dead viewers under `base` (the system temp folder); returns them."""
    removed = []
    for path in sorted(Path(base or tempfile.gettempdir()).glob(f"{PREFIX}*")):
        try:
            stale = _stale(path)
        except OSError:  # gone meanwhile, or unreadable: not ours to judge
            continue
        if stale:
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    if removed:
        logger.info("removed %d scratch folder(s) of viewers that were killed: %s", len(removed),
                    ", ".join(p.name for p in removed))
    return removed


class ScratchFolder:
    """A new scratch folder, locked as this process's while it lives; stale ones are removed first."""

    def __init__(self) -> None:
        import fcntl

        remove_stale()
        self.path = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-"))
        self._fd: int | None = os.open(self.path / _LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        fcntl.flock(self._fd, fcntl.LOCK_EX)

    def cleanup(self) -> None:
        """Remove the folder (idempotent)."""
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None
        shutil.rmtree(self.path, ignore_errors=True)
