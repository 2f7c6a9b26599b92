"""`steerable train` on several processes (torchrun, gloo on CPU): the global batch, gradient accumulation,
a rank that dies, and resuming on another number of processes.

Tolerances (docs/train.md, "More than one device"): each rank draws its own flow noise, and DDP averages
the ranks' mean losses (not a mean over all tokens), so the runs agree closely, not exactly. At lr 3e-4
without warm-up, over 3 steps: the logged text loss of every step (pooled over the ranks by token) within
3e-3 and the held-out text loss at the end within 6e-3 (measured: at most 1.4e-3 and 2.7e-3; the text loss
falls by about 3e-2 meanwhile, and 2 processes whose gradients are not averaged miss by 1.1e-2 and 1.6e-2).

`--parallel fsdp` computes what DDP does, in another order of the same sums: its logged and held-out losses
and the actions of its checkpoint, loaded on one process, within 1e-5 of the DDP run's (measured: at most
1.2e-7), its weight average, training weights and optimizer moments within 2e-5 (measured: at most 5e-6);
resumed across the two, 2 more steps' text losses within 3e-3 (measured: 2.2e-4), and each step folds its
weights into the saved average within 1e-6.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
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


FSDP_ARGS = ("--batch_size", "4", "--action_batch_size", "2")  # the default weight average (--ema_decay 0.999)


@pytest.fixture(scope="module")
def runs(dataset: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """3 steps with a global batch of 8, trained once for the module's tests (which copy a run before resuming
    it): on one process (one/), on 2 processes replicated (ddp/) and sharded (fsdp/); NAME.stdout beside."""
    root = tmp_path_factory.mktemp("runs")
    for name, cmd in (("one", _train(dataset, root / "one", "--steps", "3", "--batch_size", "8",
                                     "--action_batch_size", "4")),
                      ("ddp", _train(dataset, root / "ddp", "--steps", "3", *FSDP_ARGS, launcher=TORCHRUN)),
                      ("fsdp", _train(dataset, root / "fsdp", "--steps", "3", *FSDP_ARGS, "--parallel", "fsdp",
                                      launcher=TORCHRUN))):
        done = _run(cmd)
        assert done.returncode == 0, (name, done.stderr[-3000:])
        (root / f"{name}.stdout").write_text(done.stdout)
    return root


def test_two_processes_step_like_one_with_twice_the_batch(runs: Path) -> None:
    assert (runs / "ddp.stdout").read_text().count("trained 3 steps") == 1  # rank 0 alone reports
    plan = _logs(runs / "ddp")[0]
    goal_phase = {k: plan.pop(k) for k in list(plan) if k.startswith("goal_")}  # the goal head's own phase first
    assert goal_phase["goal_best_step"] == 3 and np.isfinite(goal_phase["goal_median"])
    assert plan == {"step": 0, "global_batch": 8, "processes": 2, "batch_size": 4, "grad_accum": 1,
                    "action_batch_size": 2, "global_action_batch": 4}
    _compare(runs / "ddp", runs / "one")


def test_grad_accum_steps_like_the_whole_batch(dataset: Path, runs: Path, tmp_path: Path) -> None:
    accum = _run(_train(dataset, tmp_path / "accum", "--steps", "3", "--batch_size", "4", "--grad_accum", "2",
                        "--action_batch_size", "2"))
    assert accum.returncode == 0, accum.stderr
    assert _logs(tmp_path / "accum")[0]["global_batch"] == 8
    _compare(tmp_path / "accum", runs / "one")


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
    args = ("--steps", "20", "--batch_size", "4", "--action_batch_size", "2", "--save_every", "2")
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
    assert not (out / "checkpoints" / "step_00000020").exists()

    resumed = _run(_train(dataset, out, *args))  # the same command, one process: the global batch of 8 is kept
    assert resumed.returncode == 0, resumed.stderr
    assert "resumed from" in resumed.stdout and "trained 20 steps" in resumed.stdout
    plans = [r for r in _logs(out) if "global_batch" in r]
    assert [(p["processes"], p["batch_size"], p["global_batch"]) for p in plans] == [(2, 4, 8), (1, 8, 8)]


def test_a_global_batch_the_processes_do_not_divide_is_one_line(dataset: Path, runs: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    shutil.copytree(runs / "one", out)  # a global batch of 8, which 1 process x --grad_accum 3 does not divide
    again = _run(_train(dataset, out, "--steps", "4", "--batch_size", "8", "--grad_accum", "3",
                        "--action_batch_size", "4"))
    assert again.returncode == 2
    assert again.stderr.strip().splitlines() == [again.stderr.strip()]
    assert "global batch" in again.stderr and "do not divide" in again.stderr


def _act(checkpoint: Path) -> np.ndarray:
    """The chunk a checkpoint, loaded on this one process, acts for a fixed observation."""
    from steerable.policy.checkpoint import load_policy
    from steerable.policy.inference import PolicyRunner

    loaded = load_policy(checkpoint)
    state = np.linspace(-0.5, 0.5, len(loaded.processor.normalizer.state_min)).astype(np.float32)
    images = {camera: np.full((16, 16, 3), 100, np.uint8) for camera in loaded.model.cfg.cameras}
    return PolicyRunner(loaded).act(["pick up the red cube"], {"state": state, "images": images})


def test_fsdp_shards_like_ddp_and_writes_a_whole_checkpoint(runs: Path) -> None:
    tmp_path = runs
    logs = [[r for r in _logs(tmp_path / run) if "loss" in r or r.get("eval")] for run in ("fsdp", "ddp")]
    for x, y in zip(*logs, strict=True):
        for name in ("loss", "text_loss", "flow_loss", "eval_text_loss", "eval_flow_loss"):
            assert x.get(name, 0.0) == pytest.approx(y.get(name, 0.0), abs=1e-5), (name, x, y)
    # The checkpoint is the one a single process writes (model.safetensors whole, the optimizer gathered).
    where = tmp_path / "fsdp" / "checkpoints" / "step_00000003"
    ddp_where = tmp_path / "ddp" / "checkpoints" / "step_00000003"
    assert np.allclose(_act(where), _act(ddp_where), atol=1e-5)
    from safetensors.torch import load_file

    # the average, the weights
    for name in ("model.safetensors", "training_weights.safetensors", "optimizer.safetensors"):
        ours, theirs = load_file(str(where / name)), load_file(str(ddp_where / name))
        assert ours.keys() == theirs.keys()
        assert all(ours[k].shape == theirs[k].shape and ours[k].allclose(theirs[k], atol=2e-5) for k in ours), name


def test_fsdp_and_one_process_resume_each_others_checkpoints(dataset: Path, runs: Path, tmp_path: Path) -> None:
    """A resume shards the whole optimizer state again (the DDP checkpoint goes on under FSDP), and the FSDP
    checkpoint goes on in one process with the same global batch: the same losses either way."""
    from safetensors.torch import load_file

    for run in ("ddp", "fsdp"):
        shutil.copytree(runs / run, tmp_path / run)

    # The averages the resumed runs start from (a run keeps its last 2 checkpoints: this one goes).
    averages = {run: load_file(str(tmp_path / run / "checkpoints" / "step_00000003" / "model.safetensors"))
                for run in ("ddp", "fsdp")}
    resumed = _run(_train(dataset, tmp_path / "ddp", "--steps", "5", *FSDP_ARGS, "--parallel", "fsdp",
                          "--save_every", "1", launcher=TORCHRUN))
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "resumed from" in resumed.stdout
    alone = _run(_train(dataset, tmp_path / "fsdp", "--steps", "5", *FSDP_ARGS, "--batch_size", "8",
                        "--action_batch_size", "4", "--save_every", "1"))
    assert alone.returncode == 0, alone.stderr[-3000:]
    after = [[r["text_loss"] for r in _logs(tmp_path / run) if r["step"] > 3 and "loss" in r]
             for run in ("ddp", "fsdp")]
    assert len(after[0]) == len(after[1]) == 2
    assert after[0] == pytest.approx(after[1], abs=3e-3)
    for run in ("ddp", "fsdp"):
        _assert_average_continues(averages[run], tmp_path / run / "checkpoints")


def _assert_average_continues(average: dict, checkpoints: Path) -> None:
    """Steps 4 and 5 of a resumed run fold their training weights into the average saved at step 3: the
    average went on (restored into the shards under FSDP), it did not start again from the weights."""
    from safetensors.torch import load_file

    for step in (4, 5):
        where = checkpoints / f"step_{step:08d}"
        weights, saved = (load_file(str(where / name))
                          for name in ("training_weights.safetensors", "model.safetensors"))
        keep = (1 + step) / (10 + step)  # the warm-up of the decay, below 0.999 this early
        # The trained parameters (model.safetensors keeps one name of a tied pair, such as the text head's).
        average = {k: average[k].lerp(w, 1 - keep) for k, w in weights.items() if k in average}
        assert any(not saved[k].allclose(weights[k]) for k in average)  # the average is not the weights
        assert all(saved[k].allclose(v, atol=1e-6) for k, v in average.items()), where


def test_fsdp_without_a_launcher_is_one_line(dataset: Path, tmp_path: Path) -> None:
    run = _run(_train(dataset, tmp_path / "run", "--steps", "1", "--parallel", "fsdp"))
    assert run.returncode == 2
    assert run.stderr.strip().splitlines() == [run.stderr.strip()]
    assert "--parallel fsdp" in run.stderr and "launcher" in run.stderr
