"""A LeRobot policy gives the same actions under `--eval_episodes` as outside it (#34, item 17).

An evaluation runs steerable's own policies on one torch thread per worker; the thread count changes
the last bits of a network's sums, so a LeRobot policy keeps torch's count there too, and its actions
stay those of `steerable run` and of LeRobot's own inference path (which
`test_lerobot_policy.py` compares tick by tick outside evaluation).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from sim_checkpoint import tiny_act

from steerable.control import Observation
from steerable.runtime.evaluation import evaluate, run_episode
from steerable.runtime.lerobot.policy import LeRobotPolicyController
from steerable.runtime.stack import LeRobotOptions, StackSpec


@pytest.fixture
def two_threads() -> Iterator[None]:
    """Torch's count above one, as on any multi-core machine (the suite's other tests run on one)."""
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


def test_a_lerobot_policy_acts_alike_in_and_out_of_an_evaluation(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, two_threads: None) -> None:
    spec = StackSpec(high_level="none", low_level="lerobot",
                     lerobot=LeRobotOptions(str(tiny_act(tmp_path / "act")), "cpu"))
    seen: list[tuple[int, np.ndarray]] = []
    act = LeRobotPolicyController.act

    def watched(self: LeRobotPolicyController, observation: Observation, command: str) -> Any:
        chunk = act(self, observation, command)
        seen.append((torch.get_num_threads(), chunk.actions.copy()))
        return chunk

    monkeypatch.setattr(LeRobotPolicyController, "act", watched)
    run_episode(spec, 3, max_seconds=1.0)  # one episode, as `steerable run` drives it
    outside = list(seen)
    seen.clear()
    evaluate(spec, 1, seed=3, workers=1, max_seconds=1.0)  # the same seed under --eval_episodes
    inside = list(seen)
    assert len(inside) == len(outside) >= 10
    assert {threads for threads, _ in inside} == {threads for threads, _ in outside} == {2}
    np.testing.assert_array_equal(np.stack([a for _, a in inside]), np.stack([a for _, a in outside]))
    assert torch.get_num_threads() == 2
