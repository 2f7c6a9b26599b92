"""A writer SIGKILLed at a random instant leaves every file old or new, and a re-run finishes the job."""

from __future__ import annotations

import hashlib
import os
import random
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from shared_data import shared_dataset

SEEDS = range(5)

# The child annotates three of the four episodes. Each row group written sleeps a little, so that
# a kill 0-200 ms after start-up can land before, inside, between or after the file replacements.
CHILD = textwrap.dedent(
    """
    import sys, time
    import pyarrow.parquet as pq
    from steerable.dataset import open_dataset
    from steerable.dataset.writer import EpisodeLanguage, write_language
    from steerable.language import speech_row

    slow_s = float(sys.argv[2])
    plain_write = pq.ParquetWriter.write_table

    def slow_write(self, table, *args, **kwargs):
        time.sleep(slow_s)
        return plain_write(self, table, *args, **kwargs)

    pq.ParquetWriter.write_table = slow_write
    ds = open_dataset(sys.argv[1])
    updates = {}
    for ep in (0, 2, 3):
        ts = ds.episode_timestamps(ep)
        updates[ep] = EpisodeLanguage(
            [{"role": "assistant", "content": f"subtask of {ep}", "style": "subtask", "timestamp": float(ts[0])}],
            [(float(ts[len(ts) // 2]), speech_row(f"halfway through {ep}"))],
        )
    print("ready", flush=True)
    write_language(ds, updates)
    print("done", flush=True)
    """
)


def hashes(root: Path) -> dict[str, str]:
    """sha256 of every file under root except atomic-write temp files."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.name.endswith(".tmp")
    }


def temp_files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*.tmp") if p.is_file()]


def start_child(script: Path, root: Path, slow_s: float) -> subprocess.Popen[str]:
    child = subprocess.Popen(
        [sys.executable, str(script), str(root), str(slow_s)], stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "ready"
    return child


def finish(script: Path, root: Path) -> None:
    child = start_child(script, root, 0.0)
    out, _ = child.communicate(timeout=120)
    assert child.returncode == 0 and out.strip() == "done"


@pytest.fixture(scope="module")
def states(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict[str, str], dict[str, str]]:
    source = shared_dataset("lingzu_teleop_4")
    base = tmp_path_factory.mktemp("crash")
    script = base / "child.py"
    script.write_text(CHILD)
    pristine = base / "pristine"
    shutil.copytree(source, pristine, ignore=shutil.ignore_patterns("videos"))
    reference = base / "reference"
    shutil.copytree(pristine, reference)
    finish(script, reference)
    old, new = hashes(pristine), hashes(reference)
    assert old.keys() == new.keys()
    assert sum(old[k] != new[k] for k in old) == 5, "all 4 shards (language columns added) and info.json"
    return script, pristine, old, new


@pytest.mark.parametrize("seed", SEEDS)
def test_killed_writer_leaves_old_or_new_files_and_rerun_completes(
    seed: int, states: tuple[Path, Path, dict[str, str], dict[str, str]], tmp_path: Path
) -> None:
    script, pristine, old, new = states
    root = tmp_path / "ds"
    shutil.copytree(pristine, root)
    child = start_child(script, root, slow_s=0.03)
    time.sleep(random.Random(seed).uniform(0.0, 0.2))
    os.kill(child.pid, signal.SIGKILL)
    child.wait(timeout=30)

    after = hashes(root)
    assert after.keys() == old.keys()
    for name, digest in after.items():
        assert digest in (old[name], new[name]), f"{name} is neither the old nor the new version"

    finish(script, root)
    assert hashes(root) == new
    assert temp_files(root) == [], "the re-run removes what the killed run left behind"
