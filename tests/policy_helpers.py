"""Shared pieces of the policy tests: a tiny configuration, a policy built on a dataset, batches."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
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


@contextmanager
def pinned_done_head(model: Any, done: bool) -> Iterator[None]:
    """`model`'s done head says `done` (probability 1, or 0) whatever it reads, until the block ends.

    An untrained head's answer is whatever its random weights give, so a test of what the low level
    does with it would have to accept either; its last layer here outputs one constant logit instead.
    The weights are put back (a loaded runner is shared by the module's tests)."""
    last = model.done_out[-1]
    weight, bias = last.weight.detach().clone(), last.bias.detach().clone()
    with torch.no_grad():
        last.weight.zero_()
        last.bias.fill_(30.0 if done else -30.0)
    try:
        yield
    finally:
        with torch.no_grad():
            last.weight.copy_(weight)
            last.bias.copy_(bias)


@contextmanager
def scripted_text(model: Any, processor: Any, text: str) -> Iterator[None]:
    """`model`'s text head says `text`, then its end token, to every prompt, until the block ends.

    An untrained text head may run on to its token budget (a failed call) or stop early with any
    words; here every decoding step gets one logit far above the rest: the script's next token. Each
    `encode` (once per generation, with the KV cache) starts the script over."""
    script = [*processor.tokenizer(text, add_special_tokens=False)["input_ids"], processor.eos_id]
    head, encode = model.backbone.logits, model.encode
    step = [0]

    def restart(*args: Any, **kwargs: Any) -> Any:
        step[0] = 0
        return encode(*args, **kwargs)

    def next_token(hidden: torch.Tensor) -> torch.Tensor:
        logits = head(hidden)
        forced = torch.full_like(logits, -1e4)
        forced[..., script[min(step[0], len(script) - 1)]] = 1e4
        step[0] += 1
        return forced

    model.encode, model.backbone.logits = restart, next_token
    try:
        yield
    finally:
        del model.encode, model.backbone.logits
