"""Keypoint tokens (`--policy.keypoints K`): K points per camera join the prefix, the flow loss trains
the net that finds them, and a trained checkpoint loads and acts with them."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from policy_helpers import TINY_FLAGS, batch_of, build, find, items, one_thread  # noqa: F401  (autouse fixture)
from steerable.cli.main import main
from steerable.dataset import open_dataset
from steerable.errors import ConfigError
from steerable.policy.checkpoint import latest_checkpoint, load_policy
from steerable.policy.config import PolicyConfig
from steerable.policy.inference import PolicyObservation, PolicyRunner
from steerable.policy.keypoints import KeypointTokens


@pytest.fixture
def root(two_annotated_episodes: Path) -> Path:
    return two_annotated_episodes


def test_a_bright_spot_pulls_a_point_that_weights_it() -> None:
    net = KeypointTokens(cameras=1, keypoints=1, channels=4, hidden=8)
    with torch.no_grad():  # a map that is the image's red channel: the point must land on the red spot
        for layer in net.net:
            if isinstance(layer, torch.nn.Conv2d):
                layer.weight.zero_()
                layer.bias.zero_()
        first, second, third = (m for m in net.net if isinstance(m, torch.nn.Conv2d))
        first.weight[0, 0, 1, 1] = 1.0
        second.weight[0, 0, 1, 1] = 1.0
        third.weight[0, 0, 1, 1] = 1.0
        net.heat.weight.zero_()
        net.heat.weight[0, 0] = 50.0
        net.heat.bias.zero_()
    seen = []
    for row, col in ((4, 4), (4, 12), (12, 4)):
        image = -torch.ones(1, 1, 3, 16, 16)
        image[0, 0, 0, row, col] = 1.0
        seen.append(_point(net, image))
    (u0, v0), (u1, v1), (u2, v2) = seen
    assert u1 > u0 + 0.5 and abs(v1 - v0) < 0.1  # moved right
    assert v2 > v0 + 0.5 and abs(u2 - u0) < 0.1  # moved down


@torch.no_grad()
def _point(net: KeypointTokens, image: torch.Tensor) -> tuple[float, float]:
    point = net.find(image)[0]
    return float(point[0, 0, 0]), float(point[0, 0, 1])


def test_the_prefix_holds_the_points_and_the_flow_loss_trains_their_net(root: Path) -> None:
    ds = open_dataset(root)
    # The same state on both (a goal-head policy reads no last motion by default, one with keypoints does).
    plain, with_points = build(ds, motion_input=True), build(ds, keypoints=3)
    data = items(ds, with_points)
    batch = with_points.processor.training_batch(batch_of(data, find(data, "actions", 4)))
    cams = len(with_points.model.cfg.cameras)
    grown, points = with_points.model.prefix(batch["images"], batch["state"])
    assert grown.shape[1] == plain.model.prefix(batch["images"], batch["state"])[0].shape[1] + 3 * cams
    pose = len(with_points.model.cfg.pose_pairs)
    assert points is not None and points.places is not None and points.places.shape == (len(grown), 3 * cams, pose)
    enc = with_points.model.encode(batch["images"], batch["state"], batch["input_ids"], batch["attention_mask"])
    assert enc.choice is not None and enc.choice.shape == (len(grown), 3 * cams)  # the command's choice
    assert enc.goal_token is not None and enc.goal_token.shape == (len(grown), 1, grown.shape[-1])  # for the expert
    batch["goal"] = torch.zeros(len(grown), with_points.model.cfg.state_dim)  # where every command ends
    out = with_points.model(batch)
    assert float(out["goal_loss"]) > 0  # the places and the choice against it
    out["loss"].backward()
    assert with_points.model.keypoints is not None
    grads = [p.grad for p in with_points.model.keypoints.parameters()]
    assert all(g is not None and float(g.abs().sum()) > 0 for g in grads)


def test_a_checkpoint_with_points_trains_loads_and_acts(root: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    argv = ["train", "--dataset", str(root), "--output_dir", str(out), "--batch_size", "4", "--action_batch_size",
            "4", "--steps", "2", "--eval_every", "100", "--no_progress", *TINY_FLAGS, "--policy.keypoints", "2"]
    assert main(argv) == 0
    checkpoint = latest_checkpoint(out)
    assert checkpoint is not None
    assert json.loads((checkpoint / "config.json").read_text())["keypoints"] == 2
    runner = PolicyRunner(load_policy(checkpoint))
    assert runner.model.keypoints is not None
    cfg = runner.cfg
    observation: PolicyObservation = {
        "state": np.zeros(cfg.state_dim, dtype=np.float32),
        "images": {cam: np.full((48, 64, 3), 120, dtype=np.uint8) for cam in cfg.cameras}}
    chunk = runner.act(["pick up the red cube"], observation)
    assert chunk.shape == (1, cfg.chunk_size, cfg.action_dim) and np.isfinite(chunk).all()


def test_each_goal_pulls_only_the_nearest_place_and_the_choice_learns_to_name_it() -> None:
    places = torch.tensor([[[0.0, 0.0], [1.0, 1.0]], [[0.5, 0.5], [-1.0, 0.0]]], requires_grad=True)
    logits = torch.zeros(2, 2, requires_grad=True)  # no choice yet
    goal = torch.tensor([[0.9, 1.0], [-1.0, 0.2]])
    loss = KeypointTokens.loss(places, logits, goal)
    nearest = ((0.1**2) / 2 + (0.2**2) / 2) / 2
    assert torch.isclose(loss, torch.tensor(nearest + math.log(2)))
    loss.backward()
    assert places.grad is not None and logits.grad is not None
    assert places.grad[0, 0].abs().sum() == 0 and places.grad[1, 0].abs().sum() == 0  # the far ones: untouched
    assert places.grad[0, 1].abs().sum() > 0 and places.grad[1, 1].abs().sum() > 0
    assert (logits.grad[:, 1] < 0).all() and (logits.grad[:, 0] > 0).all()  # toward naming place 1


def test_keypoints_or_a_locator_take_the_place_of_the_goal_head() -> None:
    """The goal head is on by default; keypoints choose a goal themselves, a locator estimates the objects."""
    assert PolicyConfig().goal_head
    assert not PolicyConfig(keypoints=4).goal_head
    assert not PolicyConfig(state_key="observation.state,observation.environment_state",
                            locate_key="observation.environment_state").goal_head


def test_a_negative_count_is_refused() -> None:
    with pytest.raises(ConfigError, match="policy.keypoints must be at least 0"):
        PolicyConfig(keypoints=-1)
