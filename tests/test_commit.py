"""The folder commit helper: links, fresh files, abort, recovery of each leftover state, concurrency."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from steerable.dataset.commit import FolderCommit, commit_folder, recover_folder
from steerable.errors import WriteError


def make_folder(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def contents(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*")) if p.is_file()}


def siblings(root: Path) -> list[str]:
    return sorted(p.name for p in root.parent.iterdir() if p != root)


@pytest.mark.parametrize("exchange", [True, False], ids=["exchange", "two-renames"])
def test_commit_links_untouched_files_and_writes_changed_ones_fresh(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, exchange: bool
) -> None:
    if not exchange:
        monkeypatch.setenv("STEERABLE_NO_EXCHANGE", "1")
    root = make_folder(tmp_path / "ds", {"videos/a.mp4": "video", "data/x.parquet": "old x", "meta/info.json": "{}"})
    video_inode = (root / "videos/a.mp4").stat().st_ino
    old_x = root / "data/x.parquet"
    with open(old_x) as kept:  # a reader holding the old version keeps reading it
        with commit_folder(root, base=root) as tx:
            tx.file("data/x.parquet").write_text("new x")
            tx.file("meta/extra.json").write_text("[]")
        assert kept.read() == "old x", "the old file was replaced, not written through"
    assert contents(root) == {"videos/a.mp4": "video", "data/x.parquet": "new x", "meta/info.json": "{}",
                              "meta/extra.json": "[]"}
    assert (root / "videos/a.mp4").stat().st_ino == video_inode, "an untouched file is the same inode"
    assert siblings(root) == []


def test_an_error_while_building_changes_nothing(tmp_path: Path) -> None:
    root = make_folder(tmp_path / "ds", {"a.txt": "a"})
    with pytest.raises(RuntimeError), commit_folder(root, base=root) as tx:
        tx.file("a.txt").write_text("changed")
        raise RuntimeError("boom")
    assert contents(root) == {"a.txt": "a"} and siblings(root) == []
    with pytest.raises(RuntimeError), commit_folder(tmp_path / "new") as tx:
        (tx.root / "b.txt").write_text("b")
        raise RuntimeError("boom")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds"]


def test_recovery_of_each_leftover_state(tmp_path: Path) -> None:
    root = make_folder(tmp_path / "ds", {"a.txt": "old"})
    # A half-built new version and no journal: deleted, the live folder stays.
    make_folder(tmp_path / ".ds.steerable-new-aa", {"a.txt": "half"})
    assert recover_folder(root) and contents(root) == {"a.txt": "old"} and siblings(root) == []
    # A journal naming a complete new version, the switch not done: finished.
    new = make_folder(tmp_path / ".ds.steerable-new-bb", {"a.txt": "new"})
    (tmp_path / ".ds.steerable-commit-bb").write_text(json.dumps({"new_inode": new.stat().st_ino}))
    assert recover_folder(root) and contents(root) == {"a.txt": "new"} and siblings(root) == []
    # Killed between the two renames: the name is missing, the journal says the new one wins.
    new = make_folder(tmp_path / ".ds.steerable-new-cc", {"a.txt": "newer"})
    (tmp_path / ".ds.steerable-commit-cc").write_text(json.dumps({"new_inode": new.stat().st_ino}))
    os.rename(root, tmp_path / ".ds.steerable-old-cc")
    assert recover_folder(root) and contents(root) == {"a.txt": "newer"} and siblings(root) == []
    # A live folder moved away without a journal: put back.
    os.rename(root, tmp_path / ".ds.steerable-old-dd")
    assert recover_folder(root) and contents(root) == {"a.txt": "newer"} and siblings(root) == []
    # A journal whose new version is nowhere (the folder was replaced by hand since): dropped.
    make_folder(tmp_path / ".ds.steerable-new-ee", {"a.txt": "stale"})
    (tmp_path / ".ds.steerable-commit-ee").write_text(json.dumps({"new_inode": 1}))
    assert recover_folder(root) and contents(root) == {"a.txt": "newer"} and siblings(root) == []
    assert not recover_folder(root)


def test_a_running_transaction_is_left_alone_and_a_concurrent_commit_is_refused(tmp_path: Path) -> None:
    root = make_folder(tmp_path / "ds", {"a.txt": "v0"})
    slow = FolderCommit(root, base=root)
    slow.file("a.txt").write_text("slow")
    with commit_folder(root, base=root) as fast:  # its start runs recovery: `slow` must survive it
        fast.file("a.txt").write_text("fast")
    assert slow.root.is_dir(), "recovery does not touch a transaction whose process is alive"
    with pytest.raises(WriteError, match="replaced by another process"):
        slow.commit()
    slow.abort()  # idempotent
    assert contents(root) == {"a.txt": "fast"} and siblings(root) == []
