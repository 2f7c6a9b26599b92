"""A language write SIGKILLed at every filesystem step leaves the dataset wholly old or wholly new.

A helper process forks one child per kill point k; the child counts the filesystem steps that
change something (links, renames, mkdirs, unlinks, chmods, parquet row groups, the directory
exchange) and kills itself with SIGKILL just before step k. (fsync is made a no-op in the child: a
SIGKILL loses nothing the kernel already has; only a power cut needs it.) After each kill the dataset,
as left, is read by pyarrow, by Hugging Face `datasets` (as LeRobot loads it) and by steerable's reader,
and must match the old or the new version byte for byte; then a re-run completes the write. Both switch
methods are covered: the atomic directory exchange, and the two-rename fallback (where the name is
briefly missing until the next open repairs it).
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from steerable.dataset import LeRobotDataset
from steerable.language import LANGUAGE_COLUMNS

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"

FORKER = textwrap.dedent(
    """
    import os, signal, sys
    import concurrent.futures, pandas, pyarrow.compute, pyarrow.dataset, pyarrow.pandas_compat  # imported once here
    import pyarrow.parquet as pq
    from steerable.dataset import commit, open_dataset
    from steerable.dataset.writer import EpisodeLanguage, write_language
    from steerable.language import speech_row

    def write(root, kill_at):
        steps = [0]
        marks = {}

        def hooked(fn):
            def wrapper(*args, **kwargs):
                steps[0] += 1
                if steps[0] == kill_at:
                    os.kill(os.getpid(), signal.SIGKILL)
                return fn(*args, **kwargs)
            return wrapper

        os.fsync = lambda fd: None
        for name in ("link", "replace", "rename", "mkdir", "unlink", "rmdir", "chmod", "fchmod"):
            setattr(os, name, hooked(getattr(os, name)))
        pq.ParquetWriter.write_table = hooked(pq.ParquetWriter.write_table)
        commit.exchange_paths = hooked(commit.exchange_paths)
        journal = commit.FolderCommit._write_journal

        def marked(self):
            marks["journal"] = steps[0] + 1  # the first step of the commit point
            return journal(self)

        commit.FolderCommit._write_journal = marked
        ds = open_dataset(root)
        updates = {}
        for ep in (0, 2, 3):
            ts = ds.episode_timestamps(ep)
            updates[ep] = EpisodeLanguage(
                [{"role": "assistant", "content": f"subtask {ep}", "style": "subtask", "timestamp": float(ts[0])}],
                [(float(ts[len(ts) // 2]), speech_row(f"halfway through {ep}"))],
            )
        steps[0] = 0  # count the write only, not the open
        write_language(ds, updates)
        return f"{steps[0]}:{marks['journal']}"

    for line in sys.stdin:
        root, kill_at, exchange = line.split()
        read, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read)
            if exchange == "0":
                os.environ["STEERABLE_NO_EXCHANGE"] = "1"
            os.write(write_end, write(root, int(kill_at)).encode())
            os._exit(0)
        os.close(write_end)
        with os.fdopen(read) as fh:
            steps = fh.read() or "-"
        _, status = os.waitpid(pid, 0)
        print(status, steps, flush=True)
    """
)


class Forker:
    def __init__(self, script: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(script)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )

    def write(self, root: Path, kill_at: int, exchange: bool) -> tuple[bool, tuple[int, int] | None]:
        """(killed, (steps the write took, the step that starts the commit) when it was not killed)."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(f"{root} {kill_at} {int(exchange)}\n")
        self.proc.stdin.flush()
        status, steps = self.proc.stdout.readline().split()
        killed = os.WIFSIGNALED(int(status))
        assert killed or os.WEXITSTATUS(int(status)) == 0, f"the writer failed (status {status})"
        if steps == "-":
            return killed, None
        total, journal = steps.split(":")
        return killed, (int(total), int(journal))

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def hashes(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def check_foreign_loads(root: Path, cache: Path) -> None:
    """pyarrow and HF `datasets` (readers that repair nothing) load the dataset as it is, per info.json."""
    import datasets

    info = json.loads((root / "meta" / "info.json").read_text())
    declared = all(c in info["features"] for c in LANGUAGE_COLUMNS)
    files = sorted(glob.glob(str(root / "data" / "*" / "*.parquet")))
    schemas = {pq.read_schema(f).remove_metadata() for f in files}
    assert len(schemas) == 1, "every shard has the same columns"
    (schema,) = schemas
    assert all(c in schema.names for c in LANGUAGE_COLUMNS) == declared, "shards match info.json"
    frames = sum(pq.read_table(f).num_rows for f in files)
    hf = datasets.load_dataset("parquet", data_files=files, split="train", cache_dir=str(cache))
    assert len(hf) == frames == info["total_frames"]


def check_our_load(root: Path) -> None:
    """Our reader opens the dataset (repairing what a kill left) and reads every episode."""
    ours = LeRobotDataset(root)
    columns = list(LANGUAGE_COLUMNS) if ours.has_language else ["timestamp"]
    for ep in ours.episodes:
        assert ours.read_episode(ep.episode_index, columns).num_rows == ep.length


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Forker, Path, dict, dict, tuple[int, int]]]:
    import datasets

    datasets.disable_progress_bars()
    source = DATA / "lingzu_teleop_4"
    assert source.is_dir(), f"the real LeRobot fixture {source} is missing (it lives in shared/data)"
    base = tmp_path_factory.mktemp("commit_crash")
    script = base / "forker.py"
    script.write_text(FORKER)
    pristine = base / "pristine"
    shutil.copytree(source, pristine)
    (pristine / ".steerable" / "staging").mkdir(parents=True)
    (pristine / ".steerable" / "staging" / "marker.json").write_text("{}\n")
    forker = Forker(script)
    reference = base / "reference" / "ds"
    shutil.copytree(pristine, reference)
    killed, steps = forker.write(reference, 0, True)
    assert not killed and steps is not None and steps[0] > 60, steps
    old, new = hashes(pristine), hashes(reference)
    assert sum(old[k] != new[k] for k in old) == 5, "all 4 shards (language columns added) and info.json"
    assert old.keys() == new.keys()
    try:
        yield forker, pristine, old, new, steps
    finally:
        forker.close()


@pytest.mark.parametrize(
    ("exchange", "phase"),
    [(True, "build"), (True, "commit"), (False, "commit")],
    ids=["exchange-build", "exchange-commit", "two-renames-commit"],
)
def test_kill_at_every_step_leaves_old_or_new_and_rerun_completes(
    setup: tuple[Forker, Path, dict, dict, tuple[int, int]], tmp_path: Path, exchange: bool, phase: str
) -> None:
    """Every step of the write with the exchange; from the commit point on with two renames (the
    steps before it are the same code). A re-run completes the write after every kill from the
    commit point on, and after every 8th kill before it."""
    forker, pristine, old, new, (steps, journal) = setup
    seen = {"old": 0, "new": 0, "missing": 0}
    first, last = (1, journal - 2) if phase == "build" else (journal - 1, steps + 4)
    for k in range(first, last + 1):
        parent = tmp_path / f"k{k}"
        root = parent / "ds"
        shutil.copytree(pristine, root, copy_function=os.link)  # links: the writer never edits in place
        killed, _ = forker.write(root, k, exchange)
        if not killed:
            assert phase == "commit" and k > steps - 2 and hashes(root) == new  # (the fallback: 2 steps more)
            break
        if root.exists():
            state = hashes(root)
            assert state in (old, new), f"kill at step {k}: the dataset is neither the old nor the new one"
            seen["old" if state == old else "new"] += 1
            check_foreign_loads(root, tmp_path / "hf-cache")
        else:
            assert not exchange, f"kill at step {k}: the dataset folder is missing"
            seen["missing"] += 1
        check_our_load(root)  # the next open repairs what the kill left
        assert sorted(p.name for p in parent.iterdir()) == ["ds"], f"kill at step {k}: leftovers remain"
        assert hashes(root) in (old, new)
        if k >= journal - 1 or k % 8 == 0:  # re-runs (time-bound): from the commit point on, and a sample before
            killed, _ = forker.write(root, 0, exchange)
            assert not killed and hashes(root) == new, f"kill at step {k}: the re-run did not complete"
        shutil.rmtree(parent)
    else:
        assert phase == "build", "the write was still being killed after its last step"
    if phase == "build":
        assert seen == {"old": journal - 2, "new": 0, "missing": 0}, seen
    else:
        assert seen["old"] >= 1 and seen["new"] >= 1, seen
        assert (seen["missing"] > 0) == (not exchange), seen
    assert hashes(pristine) == old, "the hard-linked pristine copy was never written through"
