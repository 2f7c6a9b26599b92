"""Shared pieces of the policy tests: a tiny configuration, a policy built on a dataset, batches."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from steerable.dataset import LeRobotDataset
from steerable.policy.data import PolicyDataset
from steerable.policy.setup import build_fresh
from steerable.recipes import load_recipe
from steerable.train import collate

# Small enough that a forward pass takes milliseconds: 16 px images (one token per camera).
TINY: dict[str, Any] = {
    "tiny_hidden": 32, "tiny_layers": 2, "tiny_heads": 2, "tiny_vision_hidden": 16, "image_size": 16,
    "tiny_patch_size": 8, "chunk_size": 4, "n_action_steps": 2, "expert_hidden": 32, "expert_heads": 2,
    "expert_layers": 2, "tiny_vocab_size": 320, "max_length": 96, "flow_steps": 4,
}
TINY_FLAGS = [f"--policy.{k}={v}" for k, v in TINY.items()]


@pytest.fixture(autouse=True)
def one_thread() -> Iterator[None]:
    """Tiny models run fastest on one thread (and 2 shared cores make more threads thrash)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def build(ds: LeRobotDataset, **overrides: Any) -> Any:
    """A fresh tiny policy (model + processor) for `ds`, seeded."""
    torch.manual_seed(0)
    return build_fresh(ds, {**TINY, **overrides}, eval_fraction=0.0, seed=0)


def items(ds: LeRobotDataset, built: Any, recipe: str = "hierarchical") -> PolicyDataset:
    return PolicyDataset(ds, load_recipe(recipe), built.model.cfg, built.processor.image_size)


def batch_of(data: PolicyDataset, positions: list[int]) -> dict[str, Any]:
    collated = collate([data[i] for i in positions])
    assert collated is not None
    return collated


def find(data: PolicyDataset, want: str, limit: int = 1, start: int = 0) -> list[int]:
    """Positions of items that are high-level with a text target (`text`) or low-level only with actions
    to train (`actions`: not a pause frame, see `steerable.policy.data`)."""
    found = []
    for i in range(start, len(data)):
        item = data[i]
        high = bool(item and item["target_message_indices"])
        low = bool(item and "low_level" in item["message_streams"] and not item["target_message_indices"]
                   and bool(item["action_mask"].any()))
        if (want == "text" and high) or (want == "actions" and low):
            found.append(i)
            if len(found) == limit:
                break
    return found


def steerable_cli(*args: str) -> subprocess.CompletedProcess[str]:
    """`steerable ARGS` in a subprocess on one thread, its output captured (at most 240 s)."""
    return subprocess.run([sys.executable, "-m", "steerable.cli.main", *args], capture_output=True, text=True,
                          env={"OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"}, timeout=240)


def easy_privileged_dataset(tmp_path_factory: pytest.TempPathFactory, name: str) -> Path:
    """Two easy episodes with oracle language and the privileged state, from a wrist camera."""
    root = tmp_path_factory.mktemp(name) / "ds"
    made = steerable_cli("make-dataset", "synthetic", "--out", str(root), "--episodes", "2", "--cameras", "wrist",
                         "--difficulty", "easy", "--with_language", "--privileged_state")
    assert made.returncode == 0, made.stderr
    return root
