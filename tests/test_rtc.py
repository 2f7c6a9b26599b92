"""Real-time chunking's guidance (steerable.policy.rtc): the new chunk's start is pulled onto the queued
actions, on an analytic flow (exact velocity of a Gaussian chunk distribution) and on the tiny policy."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from policy_helpers import build, one_thread  # noqa: F401  (autouse fixture)
from steerable.control import ChunkPrefix
from steerable.dataset import open_dataset
from steerable.policy.checkpoint import LoadedPolicy
from steerable.policy.inference import PolicyRunner
from steerable.policy.rtc import PrefixGuidance, guidance_weight, guided_chunk
from steerable.recipes import load_recipe
from steerable.runtime.chunks import prefix_weights
from train_data import annotate_synthetic

H = 16


def _gaussian_velocity(mean: torch.Tensor, cov: torch.Tensor) -> Any:
    """The exact flow velocity for chunks a ~ N(mean, cov) under x_t = t noise + (1 - t) a:
    v = (x - E[a | x]) / t."""
    eye = torch.eye(len(mean), dtype=torch.float64)

    def velocity(x: torch.Tensor, t: float) -> torch.Tensor:
        flat = x.reshape(x.shape[0], -1).double()
        cov_x = (1 - t) ** 2 * cov + t**2 * eye
        gain = (1 - t) * cov @ torch.linalg.inv(cov_x)
        clean = mean + (flat - (1 - t) * mean) @ gain.T
        return ((flat - clean) / t).reshape(x.shape).to(x.dtype)

    return velocity


def _sample(velocity: Any, noise: torch.Tensor, guide: PrefixGuidance | None, steps: int = 10) -> torch.Tensor:
    x, dt = noise.clone(), -1.0 / steps
    for i in range(steps):
        t = 1.0 + i * dt
        tt = torch.full((x.shape[0],), t, dtype=x.dtype)
        v = velocity(x, t) if guide is None else guide(x, tt, lambda y, t=t: velocity(y, t))
        x = x + dt * v
    return x


def test_guidance_pulls_the_start_of_an_analytic_flow_chunk_onto_the_prefix() -> None:
    # Chunks are a ramp plus one random offset shared by all steps (sd 1): every offset is as good.
    mean = torch.linspace(0, 1, H, dtype=torch.float64)
    cov = torch.ones(H, H, dtype=torch.float64) + 1e-4 * torch.eye(H, dtype=torch.float64)
    velocity = _gaussian_velocity(mean, cov)
    noise = torch.randn(64, H, 1, generator=torch.Generator().manual_seed(0))
    target = (mean + 1.5).float().reshape(1, H, 1)  # the chunk under way took offset 1.5
    weights = torch.as_tensor(prefix_weights(8, 3))
    padded = torch.cat([weights, torch.zeros(H - 8)])
    free = _sample(velocity, noise, None)
    guided = _sample(velocity, noise, PrefixGuidance(target.expand(64, H, 1), padded, max_guidance=5.0))
    err_free = (free[:, :3] - target[:, :3]).abs().mean()
    err_guided = (guided[:, :3] - target[:, :3]).abs().mean()
    assert err_guided < 0.1 * err_free, (float(err_guided), float(err_free))
    # Still a chunk of the distribution: a ramp (steps between actions as the mean's), not a jump.
    steps = guided[:, 1:, 0] - guided[:, :-1, 0]
    assert torch.allclose(steps, torch.full_like(steps, 1 / (H - 1)), atol=0.02)
    assert float(guidance_weight(torch.tensor([1.0]), 5.0)) == 5.0
    assert float(guidance_weight(torch.tensor([0.5]), 5.0)) == pytest.approx(2.0)


@pytest.fixture(scope="module")
def runner(tmp_path_factory: pytest.TempPathFactory) -> PolicyRunner:
    root = tmp_path_factory.mktemp("rtc") / "ds"
    annotate_synthetic(root, episodes=2)
    built = build(open_dataset(root), chunk_size=8, n_action_steps=8)
    recipe = Path(load_recipe("hierarchical").origin).read_text(encoding="utf-8")
    return PolicyRunner(LoadedPolicy(built.model, built.processor, recipe, root), "cpu")


def test_the_tiny_policy_guided_chunk_starts_where_the_queued_actions_are(runner: PolicyRunner) -> None:
    cfg = runner.cfg
    g = torch.Generator().manual_seed(1)
    obs = {"images": {c: torch.randint(0, 255, (40, 48, 3), generator=g, dtype=torch.uint8).numpy()
                      for c in cfg.cameras},
           "state": np.full(cfg.state_dim, 0.1, dtype=np.float32)}
    runner.generator.manual_seed(0)
    free = runner.act(["pick up the red cube"], obs)[0]
    queued = free[:4] + np.float32(0.05)  # what the robot is executing: 5 cm off this sample's start
    prefix = ChunkPrefix(queued, prefix_weights(4, 2), delay=2, max_guidance=5.0)
    runner.generator.manual_seed(0)  # the same noise: only the guidance differs
    guided = guided_chunk(runner, "pick up the red cube", obs, prefix)
    assert guided.shape == free.shape
    err_free = np.abs(free[:2] - queued[:2]).mean()
    err_guided = np.abs(guided[:2] - queued[:2]).mean()
    assert err_guided < 0.5 * err_free, (err_guided, err_free)
