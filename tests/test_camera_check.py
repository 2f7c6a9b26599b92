"""The step check from the cameras: with no object description, a policy with a goal head learns whether a
command reported done took from what its goal head found of the command's words, the frames where each
command started (before it took) against those where it was done. Checked on a world that is not the
simulator's (`test_goal_head`'s: joints, a mug and a tray, no object in the state)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from policy_helpers import batch_of, build, one_thread  # noqa: F401
from steerable.dataset import open_dataset
from steerable.policy.checkpoint import load_policy, save_checkpoint
from steerable.policy.data import PolicyDataset
from steerable.policy.episodes import EpisodeSubtasks
from steerable.policy.goal import checks_from_cameras
from steerable.policy.inference import PolicyRunner
from steerable.policy.objects import RELATION_WIDTH
from steerable.recipes import load_recipe
from steerable.train.torch_dataset import FEATURES
from test_goal_head import _world

RECIPE_TEXT = (Path(__file__).resolve().parents[1] / "src/steerable/recipes/builtin/hierarchical.yaml").read_text()


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _world(tmp_path_factory.mktemp("check") / "ds")


def test_the_counter_examples_are_each_commands_first_frames() -> None:
    spans = EpisodeSubtasks([(0, "a"), (10, "b"), (13, "c")], event_frames=[], final_still=18, length=20, fps=5)
    assert spans.beginnings() == [(r, "a") for r in range(5)] + [(r, "b") for r in range(10, 13)] + [
        (r, "c") for r in range(13, 18)]


def test_the_check_reads_the_goal_heads_evidence_and_learns_from_each_commands_start(world: Path) -> None:
    ds = open_dataset(world)
    built = build(ds)  # the defaults: a goal head (no object in the state), a done head and its check
    model, proc = built.model, built.processor
    assert checks_from_cameras(model.cfg) and model.check_cameras and model.goal is not None
    assert model.check_out[0].in_features == model.goal.evidence_width  # no pooled context by default
    data = PolicyDataset(ds, load_recipe("hierarchical"), model.cfg, proc.image_size, component="low_level_execution")
    assert data.check_items
    first = len(data.positions) + len(data.extra) + len(data.done_items)
    undone, done = data[first], data[len(data.positions) + len(data.extra)]
    assert undone is not None and done is not None
    assert float(undone["check"]) == 0.0 and float(undone["done"]) == -1.0 and not undone["action_mask"].any()
    assert float(done["check"]) == 1.0 and float(done["done"]) == 1.0
    # The counter-example is the frame as recorded (nothing moved in a state that holds no object), at the
    # start of its command's segment.
    position, command = data.check_items[0]
    recorded = data.frames.item(position, data.component)[FEATURES]["observation.state"].reshape(-1)
    torch.testing.assert_close(undone["state"], recorded.float())
    assert data.frames.locate(position)[1] == 0 and command == "lift the mug"
    batch = proc.training_batch(batch_of(data, [first, len(data.positions) + len(data.extra), 0]))
    model.cfg.goal_loss_weight = 0.0  # only the check's gradient below
    out = model(batch)
    assert torch.isfinite(out["check_loss"]) and float(out["check_loss"]) > 0
    out["loss"].backward()
    assert model.check_out[0].weight.grad is not None and model.check_out[0].weight.grad.abs().sum() > 0
    # The evidence is detached: the check does not move the goal head.
    assert all(p.grad is None or p.grad.abs().sum() == 0 for p in model.goal.trunk.parameters())


def test_a_camera_policy_answers_whether_a_step_took_and_an_old_one_keeps_its_relation_check(
        world: Path, tmp_path: Path) -> None:
    ds = open_dataset(world)
    built = build(ds)
    where = save_checkpoint(tmp_path / "new", 1, built.model, built.processor, RECIPE_TEXT)
    runner = PolicyRunner(load_policy(where))
    frame = np.full((16, 16, 3), 180, np.uint8)
    observation = {"state": np.zeros(4, np.float32),
                   "images": {cam: frame for cam in runner.cfg.cameras}}
    took = runner.step_took("lift the mug", observation)
    assert took is not None and 0.0 < took < 1.0
    # A checkpoint from before the setting (its config does not name it) has the check it was trained with:
    # on the objects' relation, which a state without objects never gives.
    before = build(ds, check_reads_goal=False)
    where = save_checkpoint(tmp_path / "old", 1, before.model, before.processor, RECIPE_TEXT)
    config_path = where / "config.json"
    config = json.loads(config_path.read_text())
    settings = config.get("policy", config)
    assert settings.pop("check_reads_goal") is False
    config_path.write_text(json.dumps(config))
    old = load_policy(where)
    assert not old.model.check_cameras and old.model.check_out[0].in_features == RELATION_WIDTH
    assert PolicyRunner(old).step_took("lift the mug", observation) is None


def test_the_goal_heads_phase_reads_the_frames_and_the_done_copies_not_the_checks_counter_examples(
        world: Path) -> None:
    from steerable.policy.goal_training import goal_items

    ds = open_dataset(world)
    built = build(ds)
    model, proc = built.model, built.processor
    data = PolicyDataset(ds, load_recipe("hierarchical"), model.cfg, proc.image_size, component="low_level_execution")
    assert data.check_items and data.done_items
    pose = [s for _, s in model.cfg.pose_pairs]
    found = goal_items(data, proc, pose, 10 ** 6, seed=0, width=model.cfg.max_length)
    assert len(data.positions) < len(found) <= len(data) - len(data.check_items)


def test_a_goal_phase_that_does_not_find_the_goal_starts_again_from_new_weights(
        world: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import steerable.policy.goal_training as phase

    ds = open_dataset(world)
    built = build(ds)
    monkeypatch.setattr(phase, "RESTART_AFTER", 1)
    monkeypatch.setattr(phase, "RESTART_SHARE", 0.0)  # never good enough: every chance to start again is taken
    starts: list[int] = []
    real = phase._new_weights
    monkeypatch.setattr(phase, "_new_weights", lambda model, seed: starts.append(seed) or real(model, seed))
    before = {k: v.clone() for k, v in built.model.goal.state_dict().items()}
    out = phase.pretrain_goal(built.model, built.processor, ds, load_recipe("hierarchical"), ([0, 1, 2], [3]), 6,
                              items=64, batch_size=4, check_every=1)
    assert out["goal_restarts"] == phase.MAX_RESTARTS == len(starts)
    assert starts == list(range(1, phase.MAX_RESTARTS + 1))  # each from other weights
    assert out["goal_chance"] > 0
    assert any(not torch.equal(before[k], v) for k, v in built.model.goal.state_dict().items())
    assert not any(p.requires_grad for p in built.model.goal.parameters())  # frozen after its phase
