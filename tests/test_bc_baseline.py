"""The pieces of benchmarks/bc_baseline.py (the plain behaviour-cloning baseline): its features are the
dataset's columns, it trains, and it runs closed loop through the runtime. No success rate is asserted."""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import replace
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[1]


def _baseline() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bc_baseline", ROOT / "benchmarks" / "bc_baseline.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bc_baseline"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def bc() -> ModuleType:
    return _baseline()


@pytest.fixture(scope="module")
def episodes(bc: ModuleType, tmp_path_factory: pytest.TempPathFactory) -> list:
    from steerable.synthetic import generate_synthetic

    out = tmp_path_factory.mktemp("bc") / "data"
    generate_synthetic(out, episodes=8, cameras=("top",), difficulty="easy", privileged_state=True)
    found, total = bc.load_episodes(out)
    assert total == 8 and found, "no single-step episode among the first 8 (seed 0)"
    return list(found)


def test_features_match_the_dataset_and_the_live_env(bc: ModuleType, episodes: list) -> None:
    """What the controller computes from the simulator is what training read from the dataset."""
    from steerable.synthetic.env import SimEnv
    from steerable.synthetic.privileged import environment_state

    ep = episodes[0]
    env = SimEnv(cameras=())
    drawn = env.reset_to_recorded(0, ep.index)
    assert drawn.task == ep.task and drawn.kind == "single"
    obs = env.observe(render=False)
    # The scene as reset is the dataset's first frame's (the gripper has not moved the cubes yet).
    np.testing.assert_array_equal(environment_state(obs.privileged), ep.env_state[0])
    for inputs, width in (("plain", 54), ("gathered", 64)):
        x = bc.features(ep.state, ep.env_state, ep.step, inputs)
        assert x.shape == (len(ep.state), width)
        np.testing.assert_array_equal(x[:, :4], ep.state)
        np.testing.assert_array_equal(x[:, 4:43], ep.env_state)
    code = bc.task_code(ep.step)
    assert code.sum() == 2 and bc.CUBES[int(np.argmax(code[:6]))] == ep.step.cube
    gathered = bc.features(ep.state, ep.env_state, ep.step, "gathered")[0]
    cube = env.world.positions[env.world.scene.cube_index(ep.step.cube)]
    np.testing.assert_allclose(gathered[54:57], cube, atol=1e-6)
    np.testing.assert_allclose(gathered[57:59], env.world.scene.receptacle(ep.step.target).center, atol=1e-6)


def test_chunks_and_pauses(bc: ModuleType, episodes: list) -> None:
    ep = episodes[0]
    y = bc.chunks(ep.action, 4)
    assert y.shape == (len(ep.action), 4, 4)
    np.testing.assert_array_equal(y[0], ep.action[:4])
    np.testing.assert_array_equal(y[-1], np.repeat(ep.action[-1:], 4, axis=0))  # held past the end
    moving = bc.without_pauses(ep)
    assert 0 < len(moving.action) < len(ep.action)
    assert np.all(np.any(moving.action[1:] != moving.action[:-1], axis=1))


def test_trains_and_runs_closed_loop(bc: ModuleType, episodes: list) -> None:
    cfg = replace(bc.BCConfig(), steps=5, batch=16, hidden=16, inputs="gathered", delta=True, drop_pauses=True)
    model = bc.train(episodes, cfg)
    ep = episodes[0]
    chunk = model.predict(bc.features(ep.state[:2], ep.env_state[:2], ep.step, "gathered"), ep.state[:2])
    assert chunk.shape == (2, cfg.horizon, 4) and np.isfinite(chunk).all()
    seeds = bc.held_out_single_seeds(1)
    result = bc.evaluate(model, seeds, max_seconds=2.0)
    assert result.episodes == 1 and len(result.traces) == 1
    assert bc.on_training_scenes(model, episodes[:1], max_seconds=1.0) in (0.0, 1.0)
    # A task the baseline cannot do is an error in the chunk, not an exception.
    controller = bc.BCController(model)
    from steerable.synthetic.env import SimEnv

    env = SimEnv(cameras=())
    env.reset(seeds[0])
    refused = controller.act(env.observe(render=False), "stack the red cube on the blue cube")
    assert refused.error and len(refused.actions) == 0
