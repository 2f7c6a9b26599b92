"""Files and folders steerable writes respect the umask, and a replaced file keeps its mode."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from annotate_helpers import REPO, copy_dataset, make_synthetic
from steerable.dataset.atomic import atomic_write_bytes


def run_cli(umask: int, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "steerable.cli.main", *args],
        capture_output=True, text=True, timeout=300, cwd=REPO, preexec_fn=lambda: os.umask(umask),
    )


def modes(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): stat.S_IMODE(p.stat().st_mode) for p in sorted(root.rglob("*"))}


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory: pytest.TempPathFactory) -> Path:
    old = os.umask(0o022)
    try:
        return make_synthetic(tmp_path_factory.mktemp("perm") / "ds", episodes=2)
    finally:
        os.umask(old)


@pytest.mark.parametrize("umask", [0o022, 0o077])
def test_in_place_annotate_keeps_modes_and_new_files_follow_the_umask(
    umask: int, synthetic: Path, tmp_path: Path
) -> None:
    root = copy_dataset(synthetic, tmp_path / "ds")
    shard = root / "data" / "chunk-000" / "file-000.parquet"
    shard.chmod(0o640)
    root.chmod(0o750)
    before = modes(root)
    result = run_cli(umask, "annotate", "--root", str(root))
    assert result.returncode == 0, result.stderr
    after = modes(root)
    assert stat.S_IMODE(root.stat().st_mode) == 0o750, "the dataset folder keeps its mode"
    assert after[str(shard.relative_to(root))] == 0o640, "a rewritten shard keeps its mode"
    assert {k: after[k] for k in before} == before, "every file and folder that existed keeps its mode"
    new = {k: m for k, m in after.items() if k not in before}
    assert new, "the run wrote its work folder"
    for name, mode in new.items():
        expected = 0o777 & ~umask if (root / name).is_dir() else 0o666 & ~umask
        assert mode == expected, f"{name}: {oct(mode)}, expected {oct(expected)} under umask {oct(umask)}"


@pytest.mark.parametrize("umask", [0o022, 0o077])
def test_new_datasets_and_exports_follow_the_umask(umask: int, tmp_path: Path) -> None:
    ds = tmp_path / "made"
    result = run_cli(umask, "make-dataset", "synthetic", "--out", str(ds), "--episodes", "1", "--cameras", "top",
                     "--difficulty", "easy", "--with_language")
    assert result.returncode == 0, result.stderr
    out = tmp_path / "export"
    result = run_cli(umask, "export", str(ds), "--recipe", "subtask_mem", "--out", str(out), "--max_samples", "5")
    assert result.returncode == 0, result.stderr
    for root in (ds, out):
        for path in [root, *root.rglob("*")]:
            expected = 0o777 & ~umask if path.is_dir() else 0o666 & ~umask
            mode = stat.S_IMODE(path.stat().st_mode)
            assert mode == expected, f"{path}: {oct(mode)}, expected {oct(expected)} under umask {oct(umask)}"


def test_atomic_replace_keeps_the_mode_of_the_file_it_replaces(tmp_path: Path) -> None:
    target = tmp_path / "info.json"
    target.write_text("{}")
    target.chmod(0o640)
    atomic_write_bytes(target, b"{}\n")
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    old = os.umask(0o027)
    try:
        atomic_write_bytes(tmp_path / "new.json", b"{}\n")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "new.json").stat().st_mode) == 0o640
