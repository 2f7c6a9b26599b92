"""`kill -9` of `steerable view` leaves its clip folder in the temp folder; the next viewer removes it, and
never the folder of a viewer still running."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from steerable.scratch import ScratchFolder, remove_stale
from steerable.viewer.server import CLIP_PREFIX as PREFIX


def view(dataset: Path, tmpdir: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "steerable.cli.main", "view", str(dataset), "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "TMPDIR": str(tmpdir)},
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()  # printed once the server (and its folder) exists
    assert "http://" in line, proc.stderr.read() if proc.stderr else line
    return proc


def folders(tmpdir: Path) -> list[str]:
    return sorted(p.name for p in tmpdir.glob(f"{PREFIX}*"))


def test_the_next_viewer_removes_the_folder_of_a_killed_one(viewer_ds: Path, tmp_path: Path) -> None:
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    killed = view(viewer_ds, tmpdir)
    left = folders(tmpdir)
    assert len(left) == 1 and left[0].startswith(f"{PREFIX}{killed.pid}-")
    killed.send_signal(signal.SIGKILL)
    killed.communicate(timeout=10)
    assert folders(tmpdir) == left, "SIGKILL leaves it"
    running = view(viewer_ds, tmpdir)
    try:
        (mine,) = folders(tmpdir)
        assert mine.startswith(f"{PREFIX}{running.pid}-")
        assert remove_stale(PREFIX, tmpdir) == [] and folders(tmpdir) == [mine], "a running viewer's folder stays"
    finally:
        running.terminate()
        running.communicate(timeout=10)
    assert folders(tmpdir) == [], "a viewer stopped as usual removes its own"


def test_only_folders_of_dead_owners_are_removed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    gone = subprocess.Popen(["true"])
    gone.wait()
    dead_locked = tmp_path / f"{PREFIX}{gone.pid}-aaa"  # its lock file, no longer held
    dead_locked.mkdir()
    (dead_locked / "owner.lock").touch()
    (dead_locked / "0-top.mp4").write_bytes(b"clip")
    dead_unlocked = tmp_path / f"{PREFIX}{gone.pid}-bbb"  # killed before it made its lock file
    dead_unlocked.mkdir()
    starting = tmp_path / f"{PREFIX}{os.getpid()}-ccc"  # a live process making its folder right now
    starting.mkdir()
    older = tmp_path / f"{PREFIX}ddd"  # an older version's name: its owner is unknown
    older.mkdir()
    live = ScratchFolder(PREFIX)
    try:
        assert live.path.parent == tmp_path
        assert sorted(p.name for p in tmp_path.iterdir()) == sorted([live.path.name, starting.name, older.name])
        assert remove_stale(PREFIX) == [] and live.path.is_dir(), "a live folder is locked by its owner"
    finally:
        live.cleanup()
    assert not live.path.exists()
