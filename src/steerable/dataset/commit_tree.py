"""Building a folder commit's new version from its base: every entry kept as it is.

Files are hard links to the base (copies where linking is impossible, or where the caller's `share`
says so), folders keep their modes, and symbolic links stay links to the same target, never followed.
A write under a symbolically linked folder first gives the new version a real folder of its own
(`own_folders`), so nothing is ever written into a link's target. `steerable.dataset.commit` is the
transaction around it.
"""

from __future__ import annotations

import errno
import logging
import os
import shutil
import stat
from collections.abc import Callable
from pathlib import Path, PurePosixPath

__all__ = ["add_folder", "add_link", "link_or_copy", "own_folders"]

log = logging.getLogger(__name__)


def link_or_copy(source: Path, target: Path) -> None:
    """A hard link of `source` at `target`, or a copy where the file system cannot link it."""
    try:
        os.link(source, target)
    except OSError as exc:
        if exc.errno not in (errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP):
            raise
        shutil.copy2(source, target)


def _shareable(source: Path, rel: PurePosixPath, share: Callable[[str], bool]) -> bool:
    """Whether `share` allows sharing what the symbolic link `source` (at `rel`) points to: the file,
    or every file under the folder."""
    if not os.path.isdir(source):
        return share(rel.as_posix())
    for dirpath, _, filenames in os.walk(source):
        here = rel / Path(dirpath).relative_to(source).as_posix()
        if not all(share((here / name).as_posix()) for name in filenames):
            return False
    return True


def add_folder(
    root: Path, dest: Path, src: Path, rel: PurePosixPath, share: Callable[[str], bool] | None,
    exclude: frozenset[str],
) -> None:
    """Put the entries of the base folder `src` at `rel` of the new version `root` (of the commit of `dest`)."""
    target_dir = root / rel
    if not os.path.isdir(target_dir):
        target_dir.mkdir(parents=True)
        os.chmod(target_dir, stat.S_IMODE(os.stat(src).st_mode))
    with os.scandir(src) as entries:
        for entry in entries:
            if entry.name in exclude:
                continue
            source, target, relative = Path(entry.path), target_dir / entry.name, rel / entry.name
            if entry.is_symlink():
                add_link(dest, source, target, relative, share)
            elif entry.is_dir(follow_symlinks=False):
                add_folder(root, dest, source, relative, share, frozenset())
            elif share is not None and not share(relative.as_posix()):
                shutil.copy2(source, target)
            else:
                link_or_copy(source, target)


def add_link(dest: Path, source: Path, target: Path, rel: PurePosixPath, share: Callable[[str], bool] | None) -> None:
    """A symbolic link of the base: the same link in the new version, its target left alone.

    A relative link keeps its text when it sits where it sat (an in-place commit); moved (a new
    folder elsewhere) it is rewritten to reach the same target. A link to what `share` says must
    not be shared (a folder: any file under it) is replaced by a copy of what it points to.
    """
    text = os.readlink(source)
    if share is not None and os.path.exists(source) and not _shareable(source, rel, share):
        if os.path.isdir(source):
            shutil.copytree(source, target, symlinks=True)
        else:
            shutil.copy2(source, target)
        return
    here, there = Path(os.path.realpath(source.parent)), Path(os.path.realpath(dest)) / rel.parent
    if not os.path.isabs(text) and here != there:
        text = os.path.relpath(os.path.normpath(os.path.join(here, text)), there)
    os.symlink(text, target)


def own_folders(root: Path, dest: Path, rel: str | Path) -> None:
    """Make every folder on the way to `rel` a real folder of the new version.

    A symbolic link to a folder met on the way is replaced by a folder holding what it pointed to
    (hard links, or copies), so that what is written or removed there never reaches the link's
    target, which another dataset may share.
    """
    parts = PurePosixPath(Path(rel).as_posix()).parts[:-1]
    for depth in range(1, len(parts) + 1):
        folder = PurePosixPath(*parts[:depth])
        path = root / folder
        if not os.path.islink(path):
            continue
        text = os.readlink(path)
        pointed = Path(os.path.realpath(path))
        log.warning("%s is a symbolic link (to %s): this write gives %s a folder of its own, holding what the "
                    "link pointed to; %s is left as it is", dest / folder, text, dest.name, text)
        os.unlink(path)
        if pointed.is_dir():
            add_folder(root, dest, pointed, folder, None, frozenset())
        else:
            path.mkdir()
