"""steerable's policy under LeRobot's own multi-process path: `accelerate launch --num_processes 2
lerobot-train --policy.type=steerable_hierarchical`, 2 CPU processes (gloo), the real lerobot.

accelerate starts several CPU processes only with `--multi_gpu` (its `--cpu` runs one); lerobot-train then
wraps the policy in DDP and gives each rank its own share of each batch (docs/lerobot.md, "Several processes").
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_helpers import BIN, FLAGS, TINY
from cli_helpers import run as _run

from steerable.policy.checkpoint import load_policy

ACCELERATE = [str(BIN / "accelerate"), "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1",
              "--mixed_precision", "no", "--dynamo_backend", "no", "--main_process_port", "0"]


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("parallel") / "synthetic"
    _run(str(BIN / "steerable"), "make-dataset", "synthetic", "--out", str(root), "--episodes", "3",
         "--difficulty", "easy", "--with_language")
    return root


def test_accelerate_launch_trains_the_policy_on_two_processes(dataset: Path, tmp_path: Path) -> None:
    out = tmp_path / "train"
    run = _run(*ACCELERATE, str(BIN / "lerobot-train"), "--policy.type=steerable_hierarchical",
               "--dataset.repo_id=local/synthetic", f"--dataset.root={dataset}", "--steps=2", "--batch_size=4",
               "--num_workers=0", "--save_freq=2", "--log_freq=1", f"--output_dir={out}", "--policy.device=cpu",
               "--policy.push_to_hub=false", "--wandb.enable=false", *FLAGS)
    logs = run.stdout + run.stderr
    assert "Effective batch size: 4 x 2 = 8" in logs  # two ranks, each its share of the batch
    assert logs.count("End of training") == 1  # rank 0 alone logs and saves
    loaded = load_policy(out / "checkpoints" / "last" / "pretrained_model")
    assert loaded.model.cfg.chunk_size == TINY["chunk_size"]
