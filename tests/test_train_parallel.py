"""`steerable train` on several processes (torchrun, gloo on CPU): the global batch, gradient accumulation,
a rank that dies, and resuming on another number of processes.

Tolerances (docs/train.md, "More than one device"): each rank draws its own flow noise, and DDP averages
the ranks' mean losses (not a mean over all tokens), so the runs agree closely, not exactly. At lr 3e-4
without warm-up, over 3 steps: the logged text loss of every step (pooled over the ranks by token) within
3e-3 and the held-out text loss at the end within 6e-3 (measured: at most 1.4e-3 and 2.7e-3; the text loss
falls by about 3e-2 meanwhile, and 2 processes whose gradients are not averaged miss by 1.1e-2 and 1.6e-2).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from policy_helpers import TINY_FLAGS, one_thread  # noqa: F401  (autouse fixture)
from train_data import annotate_synthetic

ENV = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
COMMON = ["--log_every", "1", "--eval_every", "100", "--no_progress", "--warmup_steps", "0", "--lr", "3e-4",
          *TINY_FLAGS]


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("train_parallel") / "ds"
    annotate_synthetic(root, episodes=3)
    return root


def _train(dataset: Path, out: Path, *extra: str, launcher: list[str] | None = None) -> list[str]:
    return [*(launcher or [sys.executable]), "-m", "steerable", "train", "--dataset", str(dataset),
            "--output_dir", str(out), *COMMON, *extra]


def _run(cmd: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, env=ENV, timeout=55)


def _logs(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "logs.jsonl").read_text().splitlines()]


def _compare(a: Path, b: Path) -> None:
    steps_a = [r for r in _logs(a) if "text_loss" in r]
    steps_b = [r for r in _logs(b) if "text_loss" in r]
    assert [r["step"] for r in steps_a] == [r["step"] for r in steps_b] == [1, 2, 3]
    for x, y in zip(steps_a, steps_b, strict=True):
        assert x["text_loss"] == pytest.approx(y["text_loss"], abs=3e-3)
    assert steps_b[-1]["text_loss"] < steps_b[0]["text_loss"] - 1e-2  # it learns more than the tolerance
    held_a, held_b = ([r for r in _logs(p) if r.get("eval")][-1] for p in (a, b))
    assert held_a["eval_text_loss"] == pytest.approx(held_b["eval_text_loss"], abs=6e-3)


def test_two_processes_step_like_one_with_twice_the_batch(dataset: Path, tmp_path: Path) -> None:
    two = _run(_train(dataset, tmp_path / "two", "--steps", "3", "--batch_size", "4", "--action_batch_size", "2",
                      launcher=TORCHRUN))
    assert two.returncode == 0, two.stderr[-3000:]
    assert two.stdout.count("trained 3 steps") == 1  # rank 0 alone reports
    one = _run(_train(dataset, tmp_path / "one", "--steps", "3", "--batch_size", "8", "--action_batch_size", "4"))
    assert one.returncode == 0, one.stderr
    plan = _logs(tmp_path / "two")[0]
    assert plan == {"step": 0, "global_batch": 8, "processes": 2, "batch_size": 4, "grad_accum": 1,
                    "action_batch_size": 2, "global_action_batch": 4}
    _compare(tmp_path / "two", tmp_path / "one")


def test_grad_accum_steps_like_the_whole_batch(dataset: Path, tmp_path: Path) -> None:
    accum = _run(_train(dataset, tmp_path / "accum", "--steps", "3", "--batch_size", "4", "--grad_accum", "2",
                        "--action_batch_size", "2"))
    assert accum.returncode == 0, accum.stderr
    whole = _run(_train(dataset, tmp_path / "whole", "--steps", "3", "--batch_size", "8", "--action_batch_size", "4"))
    assert whole.returncode == 0, whole.stderr
    assert _logs(tmp_path / "accum")[0]["global_batch"] == 8
    _compare(tmp_path / "accum", tmp_path / "whole")


def _rank_pid(parent: int, rank: int) -> int | None:
    """The worker of `rank` among the launcher's children (its RANK in /proc/PID/environ)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            environ = (entry / "environ").read_bytes().split(b"\0")
        except (OSError, IndexError, ValueError):
            continue
        if ppid == parent and f"RANK={rank}".encode() in environ:
            return int(entry.name)
    return None


def test_a_killed_rank_ends_the_job_and_one_process_resumes(dataset: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    args = ("--steps", "40", "--batch_size", "4", "--action_batch_size", "2", "--save_every", "2")
    job = subprocess.Popen(_train(dataset, out, *args, launcher=TORCHRUN), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, env=ENV)
    try:
        deadline = time.monotonic() + 40
        while not (out / "checkpoints" / "step_00000002").is_dir():
            assert job.poll() is None, job.communicate()[1][-3000:]
            assert time.monotonic() < deadline
            time.sleep(0.05)
        victim = _rank_pid(job.pid, 1)
        assert victim is not None
        os.kill(victim, signal.SIGKILL)
        killed = time.monotonic()
        _, stderr = job.communicate(timeout=20)
        took = time.monotonic() - killed
    finally:
        if job.poll() is None:
            job.kill()
            job.wait()
    assert job.returncode == 1 and took < 10, (job.returncode, took, stderr[-3000:])
    assert "rank      : 1" in stderr and "SIGKILL" in stderr  # the launcher names the rank that died
    # Rank 0 ends with at most one line of its own (gloo's lost connection, or the launcher's SIGTERM).
    assert "Traceback" not in stderr.split("Sending process")[0]
    assert not (out / "checkpoints" / "step_00000040").exists()

    resumed = _run(_train(dataset, out, *args))  # the same command, one process: the global batch of 8 is kept
    assert resumed.returncode == 0, resumed.stderr
    assert "resumed from" in resumed.stdout and "trained 40 steps" in resumed.stdout
    plans = [r for r in _logs(out) if "global_batch" in r]
    assert [(p["processes"], p["batch_size"], p["global_batch"]) for p in plans] == [(2, 4, 8), (1, 8, 8)]


def test_a_global_batch_the_processes_do_not_divide_is_one_line(dataset: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    first = _run(_train(dataset, out, "--steps", "3", "--batch_size", "3", "--action_batch_size", "2"))
    assert first.returncode == 0, first.stderr
    again = _run(_train(dataset, out, "--steps", "4", "--batch_size", "3", "--grad_accum", "2",
                        "--action_batch_size", "2"))
    assert again.returncode == 2
    assert again.stderr.strip().splitlines() == [again.stderr.strip()]
    assert "global batch" in again.stderr and "do not divide" in again.stderr
