"""Commit a new version of a folder all-or-nothing: build it beside the live one, then switch.

Every reader sees the folder wholly old or wholly new, whenever the writer is killed. For a folder
`<parent>/<name>` a transaction with token T uses hidden siblings in `<parent>`:

1. `.<name>.steerable-lock-T`: locked (flock) for the transaction's whole life; a killed process
   drops the lock, so recovery can tell a dead transaction from a running one.
2. `.<name>.steerable-new-T/`: the new version. Files the transaction does not change are hard
   links to the base version (copies where linking is impossible, or where `share` says so);
   symbolic links stay symbolic links to the same target; changed files are written fresh, never
   through a link of either kind.
3. `.<name>.steerable-commit-T`: the journal (the new folder's inode number), written as
   `...-pending-T` and renamed: the commit point. Before it the old version wins, after it the new.
4. The switch: one `renameat2(RENAME_EXCHANGE)` of new and live (Linux); elsewhere two renames,
   live to `.<name>.steerable-old-T`, then new to live, with an instant where the name is missing.
5. The old version, the journal and the lock are removed.

`recover_folder` (run on every dataset open and before every commit) finishes a dead transaction
that has a journal, and undoes one that has not. The full story: docs/writing.md.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import re
import secrets
import shutil
import stat
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path, PurePosixPath

from steerable.dataset.atomic import exchange_paths, fsync_dir
from steerable.dataset.commit_tree import add_folder, own_folders
from steerable.errors import WriteError, explain_os_error, os_cause

__all__ = ["FolderCommit", "commit_folder", "recover_folder"]

log = logging.getLogger(__name__)

_KINDS = ("new", "old", "commit", "pending", "lock")
_TOKEN_BYTES = 6


def _sibling(dest: Path, kind: str, token: str) -> Path:
    return dest.parent / f".{dest.name}.steerable-{kind}-{token}"


def _leftovers(dest: Path) -> dict[str, set[str]]:
    """token -> the kinds of sibling that exist for it."""
    pattern = re.compile(rf"\.{re.escape(dest.name)}\.steerable-({'|'.join(_KINDS)})-([0-9a-f]+)")
    found: dict[str, set[str]] = {}
    try:
        names = os.listdir(dest.parent)
    except (FileNotFoundError, NotADirectoryError, PermissionError):
        return found
    for name in names:
        match = pattern.fullmatch(name)
        if match:
            found.setdefault(match.group(2), set()).add(match.group(1))
    return found


def _ino(path: Path) -> int | None:
    try:
        return os.stat(path, follow_symlinks=False).st_ino
    except FileNotFoundError:
        return None


def _place(dest: Path | str) -> Path:
    """Where a commit of `dest` happens: `dest` itself, or where it points when it is a symbolic link
    (the link is kept; the folder it names gets the new version)."""
    path = Path(dest).absolute()
    return Path(os.path.realpath(path)) if os.path.islink(path) else path


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
        return
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


class _Lock:
    """The flock on `.<name>.steerable-lock-T`, held while a transaction (or its recovery) runs."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path, self.fd, self.held = path, fd, True

    @classmethod
    def try_acquire(cls, path: Path) -> _Lock | None:
        import fcntl  # POSIX only, like the rest of this protocol

        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            # A recovery may have unlinked the file between our open and our lock: then it is not ours.
            if os.fstat(fd).st_ino == _ino(path):
                return cls(path, fd)
        except BlockingIOError:
            pass
        os.close(fd)
        return None

    def release(self) -> None:
        if not self.held:
            return
        self.held = False
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        os.close(self.fd)


def _switch(dest: Path, new: Path, token: str) -> None:
    """Put the committed `new` folder at `dest`; a live `dest` ends up at `new` or at the old sibling."""
    if dest.exists() and exchange_paths(new, dest):
        return
    if dest.exists():
        os.replace(dest, _sibling(dest, "old", token))
    os.replace(new, dest)


def _finish(dest: Path, token: str, new_ino: int) -> None:
    """Complete a committed transaction (journal written): switch if needed, then clean up."""
    new, old = _sibling(dest, "new", token), _sibling(dest, "old", token)
    if _ino(new) == new_ino and _ino(dest) != new_ino:
        _switch(dest, new, token)
    elif _ino(dest) != new_ino:  # switched in long ago, then `dest` was replaced or deleted by hand
        log.warning("dropping the leftovers of an old commit of %s (%s was replaced since)", dest, dest.name)
        if not dest.exists() and old.is_dir():
            os.replace(old, dest)
    fsync_dir(dest.parent)
    for kind in ("new", "old", "commit"):  # after an exchange the old version sits at `new`
        _remove(_sibling(dest, kind, token))


def recover_folder(dest: Path | str) -> bool:
    """Finish or undo transactions on `dest` whose process died; True if anything was done.

    Transactions still running (their lock is held) are left alone. Needs write access to the
    parent only when there is something to repair.
    """
    dest = _place(dest)
    changed = False
    for token, kinds in sorted(_leftovers(dest).items()):
        try:
            lock = _Lock.try_acquire(_sibling(dest, "lock", token))
        except OSError as exc:
            if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS) and dest.exists():
                log.warning("cannot clean the leftovers of an interrupted write beside %s: %s", dest, exc)
                continue
            raise WriteError(f"cannot repair an interrupted write of {dest}: {explain_os_error(exc)}") from exc
        if lock is None:
            continue  # a live transaction
        try:
            changed |= _recover_token(dest, token, kinds)
        finally:
            lock.release()
    return changed


def _recover_token(dest: Path, token: str, kinds: set[str]) -> bool:
    journal = _sibling(dest, "commit", token)
    new_ino = _read_journal(journal) if "commit" in kinds else None
    if new_ino is not None:
        log.warning("finishing an interrupted commit of %s", dest)
        _finish(dest, token, new_ino)
        return True
    _remove(_sibling(dest, "pending", token))
    _remove(_sibling(dest, "commit", token))
    _purge(_sibling(dest, "new", token))
    old = _sibling(dest, "old", token)
    if old.exists() and not dest.exists():
        log.warning("restoring %s after an interrupted write", dest)
        os.replace(old, dest)
        fsync_dir(dest.parent)
    _remove(old)
    return bool(kinds - {"lock"})


def _purge(path: Path) -> None:
    """Remove a half-built folder and whatever transactions nested in it left beside it."""
    for token, kinds in _leftovers(path).items():
        for kind in kinds:
            _purge(_sibling(path, kind, token)) if kind == "new" else _remove(_sibling(path, kind, token))
    _remove(path)


def _read_journal(path: Path) -> int | None:
    try:
        return int(json.loads(path.read_text(encoding="utf-8"))["new_inode"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


class FolderCommit:
    """One transaction: `root` is the new version being built; `commit()` switches it in.

    `base` is the folder the new version starts from (hard links of all its files, its symbolic
    links as they are, except the top-level names in `exclude`; files for which `share(relative
    path)` is False are copied). Write every changed or new file at the path `file(rel)` returns: it
    never writes through a link. A `dest` that is a symbolic link stays one: the folder it points to
    gets the new version.
    """

    def __init__(
        self,
        dest: Path | str,
        *,
        base: Path | str | None = None,
        share: Callable[[str], bool] | None = None,
        exclude: Sequence[str] = (),
        durable: bool = True,
    ) -> None:
        self.dest = _place(dest)
        if os.path.ismount(self.dest):
            raise WriteError(
                f"{self.dest} is a mount point, so a new version cannot be renamed into its place; "
                "write to a folder inside it or beside it instead"
            )
        self.durable = durable
        self._modes: dict[Path, int] = {}
        recover_folder(self.dest)
        try:
            self.dest.parent.mkdir(parents=True, exist_ok=True)
            self._lock = self._acquire()
        except OSError as exc:
            raise self._error(exc) from exc
        self.token = self._lock.path.name.rsplit("-", 1)[1]
        self.root = _sibling(self.dest, "new", self.token)
        self._live_ino = _ino(self.dest)
        try:
            os.mkdir(self.root)
            if self._live_ino is not None:
                os.chmod(self.root, stat.S_IMODE(os.stat(self.dest).st_mode))
            if base is not None:
                self.add_tree(Path(base), share=share, exclude=exclude)
        except BaseException as exc:
            self.abort()
            if (cause := os_cause(exc)) is not None:
                raise self._error(cause) from exc
            raise

    def _acquire(self) -> _Lock:
        while True:
            token = secrets.token_hex(_TOKEN_BYTES)
            lock = _Lock.try_acquire(_sibling(self.dest, "lock", token))
            if lock is not None:
                return lock

    def _error(self, exc: OSError) -> WriteError:
        return WriteError(f"could not write {self.dest}: {explain_os_error(exc, paths=False)}; it is unchanged")

    # -- building -------------------------------------------------------------------------------
    def add_tree(
        self, src: Path, rel: str = "", *, share: Callable[[str], bool] | None = None, exclude: Sequence[str] = ()
    ) -> None:
        """Put the entries under `src` at `rel` in the new version, each kept as it is: files as hard links
        (or copies), folders with their modes, symbolic links as links (never followed, see `commit_tree.add_link`)."""
        add_folder(self.root, self.dest, Path(src), PurePosixPath(rel), share, frozenset(exclude))

    def file(self, rel: str | Path) -> Path:
        """The path to write `rel` of the new version at: a fresh file keeping the replaced file's mode.

        It never writes through a link: a hard link to the base (the old version shares the inode) is
        removed first, a symbolic link is replaced by a file of its own, and a symbolically linked
        folder on the way becomes a real folder (`own_folders`).
        """
        own_folders(self.root, self.dest, rel)
        path = self.root / rel
        mode: int | None
        try:
            mode = os.stat(path, follow_symlinks=False).st_mode
        except FileNotFoundError:
            path.parent.mkdir(parents=True, exist_ok=True)
            return path
        if stat.S_ISLNK(mode):
            text = os.readlink(path)
            log.warning("%s is a symbolic link (to %s): this write replaces it by a file of its own; %s is "
                        "left as it is", self.dest / rel, text, text)
            try:
                mode = os.stat(path).st_mode  # the mode a reader of the link saw
            except OSError:
                mode = None  # a dangling link: the new file gets the default mode
        if mode is not None:
            self._modes[path] = stat.S_IMODE(mode)
        path.unlink()
        return path

    def remove(self, rel: str | Path) -> None:
        """Drop `rel` from the new version (a symbolic link itself, never what it points to)."""
        own_folders(self.root, self.dest, rel)
        _remove(self.root / rel)

    # -- ending ---------------------------------------------------------------------------------
    def commit(self, *, keep_on_error: bool = False) -> Path:
        """Switch the new version in; returns `dest`. Raises WriteError: then nothing changed, and the new
        version is dropped, or kept with `keep_on_error` (to make room and commit again, or `abort`)."""
        try:
            for path, mode in self._modes.items():
                if path.exists():
                    os.chmod(path, mode)
            if self.durable:
                self._sync()
            if _ino(self.dest) != self._live_ino:
                raise WriteError(f"{self.dest} was replaced by another process during this write; "
                                 "nothing of this write was kept: run it again")
            self._write_journal()
        except BaseException as exc:
            if not keep_on_error:
                self.abort()
            if (cause := os_cause(exc)) is not None:
                raise self._error(cause) from exc
            raise
        try:
            _finish(self.dest, self.token, _ino(self.root) or 0)
        except OSError as exc:
            raise WriteError(
                f"the new version of {self.dest} is complete but could not be switched in "
                f"({explain_os_error(exc)}); the next open of the dataset finishes it"
            ) from exc
        finally:
            self._lock.release()
        return self.dest

    def abort(self) -> None:
        """Drop the new version; `dest` stays as it was. Does nothing after a commit or an abort."""
        if not self._lock.held:
            return
        _remove(self.root)
        _remove(_sibling(self.dest, "pending", self.token))
        self._lock.release()

    def _write_journal(self) -> None:
        pending = _sibling(self.dest, "pending", self.token)
        fd = os.open(pending, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o666)
        try:
            os.write(fd, json.dumps({"new_inode": _ino(self.root)}).encode())
            if self.durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(pending, _sibling(self.dest, "commit", self.token))
        if self.durable:
            fsync_dir(self.dest.parent)

    def _sync(self) -> None:
        """fsync every new file (written here or copied; links to the base are durable) and folder."""
        for dirpath, _, filenames in os.walk(self.root):
            for name in filenames:
                st = os.lstat(path := os.path.join(dirpath, name))
                if stat.S_ISREG(st.st_mode) and st.st_nlink == 1:
                    fd = os.open(path, os.O_RDONLY)
                    try:
                        os.fsync(fd)
                    finally:
                        os.close(fd)
            fsync_dir(Path(dirpath))


@contextlib.contextmanager
def commit_folder(
    dest: Path | str,
    *,
    base: Path | str | None = None,
    share: Callable[[str], bool] | None = None,
    exclude: Sequence[str] = (),
    durable: bool = True,
) -> Iterator[FolderCommit]:
    """A FolderCommit that commits on a clean exit and aborts on an exception."""
    tx = FolderCommit(dest, base=base, share=share, exclude=exclude, durable=durable)
    try:
        yield tx
    except BaseException as exc:
        tx.abort()
        if (cause := os_cause(exc)) is not None:
            raise tx._error(cause) from exc  # names `dest`, not a path inside the new version
        raise
    tx.commit()

