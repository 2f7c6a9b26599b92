"""One writer at a time per dataset: a flock on `<work folder>/annotate.lock`.

`steerable annotate` takes it for its whole run, `steerable view --edit` for its whole session and
`steerable revisions --restore` while it writes: a second writer on the same dataset (or the same
annotate --output_dir) is refused at its start, naming the one that holds the lock, instead of one
of them throwing its work away at the commit. The kernel drops a flock when its process dies,
killed or not, so a killed writer never blocks the next one; the file itself only tells who holds
the lock (what, pid, host, start time), for that message.

The file lives inside the dataset (`.steerable/`); a folder commit of the dataset hard-links it into
the new version, so the inode, and with it the lock, survives every commit made while it is held.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import socket
from pathlib import Path

from steerable.errors import SteerableError

__all__ = ["LOCK_NAME", "RunLock", "RunLockedError"]

LOCK_NAME = "annotate.lock"


class RunLockedError(SteerableError):
    """Another steerable process (`annotate`, `view --edit`...) is writing the dataset."""


class RunLock:
    """The held lock of this writer; `release` drops it (and what `acquire` created, when left empty)."""

    def __init__(self, path: Path, fd: int, created: list[Path]) -> None:
        self.path, self._fd, self._created = path, fd, created

    @classmethod
    def acquire(cls, work_dir: Path, dataset: Path, what: str = "steerable annotate") -> RunLock:
        """Lock `work_dir` for `what` (shown to a refused writer), or raise RunLockedError naming the holder."""
        import fcntl  # POSIX only, like the folder commit

        created = [d for d in (work_dir, *work_dir.parents) if not d.exists()]
        work_dir.mkdir(parents=True, exist_ok=True)
        path = work_dir / LOCK_NAME
        while True:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _holder(fd)
                os.close(fd)
                raise RunLockedError(
                    f"another {holder} is writing {dataset}; wait for it to finish (or stop it), then run this again"
                ) from None
            if os.fstat(fd).st_ino == _ino(path):
                break
            os.close(fd)  # its last holder removed the file as it finished: lock the new one
        started = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
        os.ftruncate(fd, 0)
        body = {"what": what, "pid": os.getpid(), "host": socket.gethostname(), "started": started}
        os.write(fd, json.dumps(body).encode())
        return cls(path, fd, created)

    def release(self, work_dir: Path | None = None) -> None:
        """Drop the lock. `work_dir`: where the work folder is now (a new --output_dir moves it)."""
        path = self.path if work_dir is None else work_dir / LOCK_NAME
        if _ino(path) == os.fstat(self._fd).st_ino:  # removed while held: whoever opened it retries
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
        os.close(self._fd)
        for folder in self._created:  # deepest first; a writer stopped before writing leaves nothing
            with contextlib.suppress(OSError):
                folder.rmdir()


def _holder(fd: int) -> str:
    try:
        info = json.loads(os.pread(fd, 4096, 0).decode("utf-8"))
        what = info.get("what") or "steerable annotate"
        return f"`{what}` (pid {info['pid']} on {info['host']}, started {info['started']})"
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return "steerable process (just starting)"


def _ino(path: Path) -> int | None:
    try:
        return os.stat(path).st_ino
    except FileNotFoundError:
        return None
