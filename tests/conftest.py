"""Shared fixtures: the real LeRobot datasets in ../shared/data (see shared_data.py) and writable copies."""

from __future__ import annotations

import shutil
import signal
from pathlib import Path

import pytest

from shared_data import shared_dataset

# A shell that starts `make test` in the background (`cmd &` without job control) hands it SIGINT
# ignored, and exec passes that on: the Ctrl-C tests' subprocesses would never see their SIGINT.
# A handled signal is reset to the default at exec, so install Python's own handler here.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

REPO = Path(__file__).resolve().parents[1]


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own hook reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """`make test` runs two workers (`-n 2 --dist loadgroup`): a file's tests stay on one worker, so its
    module fixtures are built once, and a file that names its own group (the files that start a Ray
    cluster: "ray") shares a worker with the others of that group."""
    for item in items:
        if item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))


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


@pytest.fixture(scope="session")
def two_annotated_episodes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two synthetic episodes with oracle language, built once per session: for tests that only read it."""
    from train_data import annotate_synthetic

    path = tmp_path_factory.mktemp("two_annotated") / "ds"
    annotate_synthetic(path, episodes=2)
    return path
