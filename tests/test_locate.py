"""A policy that estimates the objects' positions from a camera (`--policy.locate_key`,
steerable.policy.locate): the estimate is what it reads, in training and at run time, it learns only
from its own loss, and the runtime runs it without the privileged state."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

from policy_helpers import (  # noqa: F401  (one_thread: an autouse fixture)
    TINY,
    TINY_FLAGS,
    batch_of,
    build,
    find,
    items,
    one_thread,
    steerable_cli,
)
from steerable.dataset import open_dataset
from steerable.policy.checkpoint import latest_checkpoint, load_policy
from steerable.synthetic.privileged import ENVIRONMENT_STATE_FEATURE

LOCATE = {"locate_key": ENVIRONMENT_STATE_FEATURE, "locate_width": 8}


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("locate") / "ds"
    made = steerable_cli("make-dataset", "synthetic", "--out", str(root), "--episodes", "2", "--difficulty", "easy",
                      "--with_language", "--privileged_state")
    assert made.returncode == 0, made.stderr
    return root


@pytest.fixture(scope="module")
def built(dataset: Path) -> Any:
    return build(open_dataset(dataset), **LOCATE)


def test_the_located_feature_goes_last_and_its_width_comes_from_the_dataset(dataset: Path) -> None:
    cfg = build(open_dataset(dataset), **LOCATE, state_key=f"{ENVIRONMENT_STATE_FEATURE},observation.state").model.cfg
    assert cfg.state_keys == ["observation.state", ENVIRONMENT_STATE_FEATURE]
    assert cfg.read_state_keys == ["observation.state"]
    assert cfg.located == 39 and cfg.state_dim == 43
    assert cfg.locate_camera == cfg.cameras[0]


def test_splicing_the_true_values_gives_the_processors_model_state(built: Any, dataset: Path) -> None:
    """The locator replaces the located values and recomputes the objects' offsets from the end
    effector as the processor computes them: fed the recorded values, it gives the same state."""
    data = items(open_dataset(dataset), built)
    batch = built.processor.training_batch(batch_of(data, find(data, "actions", limit=4)))
    true = batch["state"]
    cfg, locator = built.model.cfg, built.model.locator
    blanked = batch_of(data, find(data, "actions", limit=4))
    blanked["state"] = blanked["state"].clone()
    blanked["state"][:, cfg.state_dim - cfg.located:] = 0.0
    zeros = built.processor.training_batch(blanked)["state"]
    assert not torch.allclose(zeros, true)
    spliced = locator.splice(zeros, true[:, cfg.state_dim - cfg.located: cfg.state_dim])
    assert torch.allclose(spliced, true, atol=1e-5)


def test_the_policy_reads_the_estimate_not_the_recorded_values(built: Any, dataset: Path) -> None:
    data = items(open_dataset(dataset), built)
    batch = built.processor.training_batch(batch_of(data, find(data, "actions", limit=2)))
    model, cfg = built.model.eval(), built.model.cfg
    other = batch["state"].clone()
    # The located values and the objects' offsets (after the motion), which are computed from them.
    for lo, hi in ((cfg.state_dim - cfg.located, cfg.state_dim), (cfg.state_dim + cfg.motion_dim, other.shape[1])):
        other[:, lo:hi] = torch.rand_like(other[:, lo:hi])
    noise = torch.randn(2, cfg.chunk_size, cfg.action_dim)
    args = (batch["input_ids"], batch["attention_mask"])
    a = model.sample_actions(batch["images"], batch["state"], *args, noise=noise)
    b = model.sample_actions(batch["images"], other, *args, noise=noise)
    assert torch.equal(a, b)
    with pytest.raises(ValueError, match="camera"):
        model.sample_actions(None, batch["state"], *args, noise=noise)


def test_the_locator_learns_from_its_own_loss_only(dataset: Path) -> None:
    ds = open_dataset(dataset)
    quiet = build(ds, **LOCATE, locate_loss_weight=0.0)
    data = items(ds, quiet)
    batch = quiet.processor.training_batch(batch_of(data, find(data, "actions", limit=4)))
    out = quiet.model(batch)
    out["loss"].backward()
    grads = [p.grad for p in quiet.model.locator.parameters()]
    assert all(g is None or not g.any() for g in grads), "the policy's losses reached the locator"
    assert float(out["locate_loss"]) > 0
    trained = build(ds, **LOCATE)
    out = trained.model(trained.processor.training_batch(batch_of(data, find(data, "actions", limit=4))))
    out["loss"].backward()
    assert any(p.grad is not None and p.grad.any() for p in trained.model.locator.parameters())


def test_the_locator_loss_counts_a_position_only_where_the_object_is(built: Any) -> None:
    locator, cfg = built.model.locator, built.model.cfg
    start = cfg.state_dim - cfg.located
    state = torch.zeros(1, cfg.state_dim)
    state[0, start:] = -1.0  # every object absent (present -1 after min/max), positions anywhere
    estimate = torch.full((1, cfg.located), 0.7)
    estimate[0, 3] = -1.0  # the red cube's present: right
    present = [i - start for i in range(start, cfg.state_dim) if cfg.state_names[i].endswith(".present")]
    wrong_present = torch.tensor([(0.7 + 1.0) ** 2] * (len(present) - 1) + [0.0])
    assert len(present) == 11
    assert abs(float(locator.loss(estimate, state)) - float(wrong_present.sum()) / len(present)) < 1e-5


def test_train_and_run_without_the_privileged_state(dataset: Path, tmp_path: Path) -> None:
    out = tmp_path / "policy"
    trained = steerable_cli("train", "--dataset", str(dataset), "--output_dir", str(out), "--steps", "2",
                         "--eval_every", "2", "--no_progress", *TINY_FLAGS,
                         f"--policy.locate_key={ENVIRONMENT_STATE_FEATURE}", "--policy.locate_width=8")
    assert trained.returncode == 0, trained.stderr
    where = latest_checkpoint(out)
    assert where is not None
    config = json.loads((where / "config.json").read_text())
    assert config["locate_key"] == ENVIRONMENT_STATE_FEATURE and config["located"] == 39
    logs = [json.loads(line) for line in (out / "logs.jsonl").read_text().splitlines()]
    assert any("locate_loss" in r for r in logs) and any("eval_locate_loss" in r for r in logs)
    loaded = load_policy(where)
    assert loaded.model.locator is not None
    assert torch.equal(loaded.model.locator.state_hi, torch.tensor(loaded.processor.normalizer.state_max))
    ran = steerable_cli("run", "--env", "sim", "--high_level", "scripted", "--low_level", "policy", "--policy.path",
                     str(out), "--eval_episodes", "1", "--max_seconds", "3", "--workers", "1", "--json")
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout)["episodes"] == 1


@pytest.mark.parametrize(("flags", "message"), [
    (["--policy.locate_key=observation.nothing"], "does not record"),
    ([f"--policy.locate_key={ENVIRONMENT_STATE_FEATURE}", "--policy.locate_camera=observation.images.side"],
     "locate_camera"),
    ([f"--policy.locate_key={ENVIRONMENT_STATE_FEATURE}", "--policy.cameras=none"], "has none"),
])
def test_bad_locate_settings_are_one_line_and_exit_2(dataset: Path, tmp_path: Path, flags: list[str],
                                                     message: str) -> None:
    out = tmp_path / "policy"
    done = steerable_cli("train", "--dataset", str(dataset), "--output_dir", str(out), "--steps", "1", *TINY_FLAGS,
                      *flags)
    assert done.returncode == 2, done.stderr
    assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert not (out / "checkpoints").exists()
