"""Shared set-up for the annotation pipeline tests: small synthetic datasets and CLI runs."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def make_synthetic(root: Path, episodes: int = 3, seed: int = 5) -> Path:
    from steerable.synthetic import generate_synthetic

    return generate_synthetic(root, episodes=episodes, cameras=("top",), seed=seed)


def copy_dataset(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def steerable(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Run the real CLI in a subprocess, as a user would."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.run(
        [sys.executable, "-m", "steerable.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=REPO,
    )


def file_hashes(root: Path, *, skip_work_dir: bool = True) -> dict[str, str]:
    """sha256 of every file under root (relative path -> digest)."""
    out = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if path.is_dir() or (skip_work_dir and rel.parts[0] == ".steerable"):
            continue
        out[str(rel)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def summary_of(root: Path) -> dict:
    return json.loads((root / ".steerable" / "run_summary.json").read_text())
