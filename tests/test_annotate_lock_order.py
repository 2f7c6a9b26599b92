"""`steerable annotate` refused by another writer's lock (`view --edit`) says so first and alone:
nothing about the episodes it would have left (#34, item 14)."""

from __future__ import annotations

from pathlib import Path

from annotate_helpers import make_synthetic, steerable
from steerable.dataset import LeRobotDataset
from steerable.dataset.layout import WORK_DIR_NAME
from steerable.dataset.lock import RunLock
from steerable.dataset.review import save_episode


def test_a_locked_dataset_is_refused_before_anything_is_said_of_its_reviewed_episodes(tmp_path: Path) -> None:
    root = make_synthetic(tmp_path / "ds", episodes=2)
    assert steerable("annotate", "--root", str(root), "--executor.progress", "false").returncode == 0
    save_episode(LeRobotDataset(root), 1, None, None, status="reviewed")  # annotate would leave it alone
    lock = RunLock.acquire(root / WORK_DIR_NAME, root, "steerable view --edit")
    try:
        refused = steerable("annotate", "--root", str(root), timeout=60)
    finally:
        lock.release()
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert refused.stdout == ""
    (line,) = refused.stderr.splitlines()  # the refusal, and nothing before or after it
    assert "another `steerable view --edit`" in line and str(root) in line, line
    # Unlocked, the same command does say it (the refusal did not just silence the warning).
    again = steerable("annotate", "--root", str(root), "--executor.progress", "false", timeout=60)
    assert again.returncode == 0 and "leaving episode(s) 1 as a person reviewed them" in again.stderr
