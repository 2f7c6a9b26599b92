"""Shared fixtures: the real LeRobot datasets in ../shared/data (see shared_data.py) and writable copies."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from shared_data import shared_dataset

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def lingzu() -> Path:
    """Real LeRobot v3 dataset with h264 video (read-only)."""
    return shared_dataset("lingzu_teleop_4")


@pytest.fixture
def so101() -> Path:
    """Real LeRobot v3 dataset whose mp4 files are absent (read-only)."""
    return shared_dataset("so101_record_test")


@pytest.fixture
def writable_copy(tmp_path: Path):
    """Return a function that copies a shared fixture into tmp_path and returns the copy."""

    def copy(name: str) -> Path:
        dst = tmp_path / name
        shutil.copytree(shared_dataset(name), dst)
        for p in dst.rglob("*"):
            p.chmod(0o755 if p.is_dir() else 0o644)
        dst.chmod(0o755)
        return dst

    return copy


@pytest.fixture(scope="module")
def viewer_ds(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The annotated synthetic dataset of the viewer and Rerun tests (built once per session)."""
    from viewer_data import session_viewer_dataset

    return session_viewer_dataset(tmp_path_factory.getbasetemp())
