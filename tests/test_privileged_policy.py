"""A policy on several state keys (gripper + privileged environment state): trained from the CLI,
loaded, and run in the simulator with `--observation privileged`; without it, one line and exit 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from policy_helpers import TINY, TINY_FLAGS, items, one_thread, pinned_done_head  # noqa: F401  (autouse fixture)
from steerable.control import Observation
from steerable.dataset import open_dataset
from steerable.dataset.frames import feature_matrix
from steerable.errors import ConfigError
from steerable.policy.checkpoint import latest_checkpoint
from steerable.policy.config import PolicyConfig
from steerable.policy.setup import build_fresh
from steerable.runtime.policy_adapter import load_high_level, load_low_level
from steerable.synthetic.env import SimEnv
from steerable.synthetic.privileged import ENVIRONMENT_STATE_FEATURE

ENV = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
KEYS = f"observation.state,{ENVIRONMENT_STATE_FEATURE}"


def _steerable(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "steerable.cli.main", *args], capture_output=True, text=True,
                          env=ENV, timeout=120)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("privileged") / "ds"
    made = _steerable("make-dataset", "synthetic", "--out", str(root), "--episodes", "2", "--cameras", "wrist",
                      "--difficulty", "easy", "--with_language", "--privileged_state")
    assert made.returncode == 0, made.stderr
    return root


@pytest.fixture(scope="module")
def checkpoint(dataset: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("privileged_run") / "run"
    trained = _steerable("train", "--dataset", str(dataset), "--output_dir", str(out), "--steps", "2",
                         "--batch_size", "4", "--no_progress", "--eval_every", "100", *TINY_FLAGS,
                         "--policy.state_key", KEYS)
    assert trained.returncode == 0, trained.stderr
    return out


def test_several_state_keys_are_concatenated_in_order(dataset: Path) -> None:
    ds = open_dataset(dataset)
    built = build_fresh(ds, {**TINY, "state_key": f" {KEYS} "}, eval_fraction=0.0, seed=0)
    cfg = built.model.cfg
    assert cfg.state_keys == ["observation.state", ENVIRONMENT_STATE_FEATURE] and cfg.state_key == KEYS
    assert cfg.state_dim == 4 + 39 and len(built.processor.normalizer.state_min) == 43
    tables = [ds.read_episode(e, ["observation.state", ENVIRONMENT_STATE_FEATURE]) for e in (0, 1)]
    everything = np.concatenate([np.concatenate([feature_matrix(t, "observation.state"),
                                                 feature_matrix(t, ENVIRONMENT_STATE_FEATURE)], axis=1)
                                 for t in tables])
    assert built.processor.normalizer.state_max == pytest.approx(everything.max(0).tolist())
    gripper = feature_matrix(tables[0], "observation.state")
    env = feature_matrix(tables[0], ENVIRONMENT_STATE_FEATURE)
    both = np.concatenate([gripper, env], axis=1)
    data = items(ds, built)
    item = data[5]
    assert item is not None and item["state"].shape == (43,)
    assert torch.equal(item["state"], torch.from_numpy(both[5]))
    # A mapping holding each key gives the same vector as the concatenation.
    stacked = built.processor.state_from({"observation.state": gripper[:3].copy(),
                                          ENVIRONMENT_STATE_FEATURE: env[:3].copy()})
    assert torch.equal(stacked, torch.from_numpy(both[:3]))


def test_a_single_key_config_loads_as_before() -> None:
    cfg = PolicyConfig.from_dict({"state_key": "observation.state", "state_dim": 4, "action_dim": 4})
    assert cfg.state_keys == ["observation.state"]
    with pytest.raises(ConfigError, match="names no feature"):
        PolicyConfig(state_key=" , ")


def test_trained_policy_acts_in_the_sim_with_privileged_observation(checkpoint: Path) -> None:
    where = latest_checkpoint(checkpoint)
    assert where is not None
    config = json.loads((where / "config.json").read_text())  # format 2: the settings at the top level
    assert config["state_key"] == KEYS and config["state_dim"] == 43
    run = _steerable("run", "--env", "sim", "--high_level", "scripted", "--low_level", "policy", "--policy.path",
                     str(checkpoint), "--observation", "privileged", "--eval_episodes", "1", "--workers", "1",
                     "--max_seconds", "2", "--json")
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout.strip().splitlines()[-1])
    assert report["episodes"] == 1 and report["mean_sim_seconds"] == pytest.approx(2.0, abs=0.2)


def test_without_the_flag_it_is_one_line_naming_it(checkpoint: Path) -> None:
    run = _steerable("run", "--env", "sim", "--high_level", "none", "--low_level", "policy", "--policy.path",
                     str(checkpoint), "--eval_episodes", "1", "--workers", "1", "--max_seconds", "1", "--json")
    assert run.returncode == 2
    assert run.stderr.strip().count("\n") == 0 and "--observation privileged" in run.stderr
    assert "Traceback" not in run.stderr


def test_the_adapter_builds_the_state_from_the_config_keys(checkpoint: Path, monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    for load in (load_low_level, load_high_level):
        with pytest.raises(ConfigError, match="--observation privileged"):
            load(checkpoint)
    low = load_low_level(checkpoint, observation="privileged")
    assert load_high_level(checkpoint, observation="privileged").runner is low.runner
    env = SimEnv(cameras=("wrist",))
    env.reset(seed=4)
    obs = env.observe()
    seen: list[np.ndarray] = []
    act = low.runner.act_and_done  # what `act` goes through (with or without the done head)
    monkeypatch.setattr(low.runner, "act_and_done", lambda commands, observation, steps=None: (
        seen.append(np.asarray(observation["state"])) or act(commands, observation, steps)))
    with pinned_done_head(low.runner.model, done=False):  # an untrained done head's call is noise
        chunk = low.act(obs, "pick up the red cube")
    assert not chunk.done and chunk.actions.shape == (TINY["n_action_steps"], 4)
    assert obs.environment_state is not None
    assert np.array_equal(seen[0], np.concatenate([obs.state, obs.environment_state]))
    with pinned_done_head(low.runner.model, done=True):
        chunk = low.act(obs, "pick up the red cube")
    assert chunk.done and chunk.actions.shape == (0, 4) and len(seen) == 2
    assert np.array_equal(seen[1], seen[0])
    # On a robot (no privileged state) the policy cannot run: one line naming the flag.
    with pytest.raises(ConfigError, match="--observation privileged"):
        low.act(Observation(state=obs.state, images=obs.images), "pick up the red cube")


def test_the_objects_the_state_names_are_name_slots_unless_groups_are_given(dataset: Path) -> None:
    """Without --policy.name_slots, the objects the dataset describes give their names, grouped by kind."""
    from steerable.policy.objects import ObjectLayout, ObjectSlots
    from steerable.policy.setup import dataset_policy_config
    from steerable.synthetic.object_schema import SIMULATOR_SCALES

    slots = [ObjectSlots(name, (k, k + 1, None), None, kind) for k, (name, kind) in
             enumerate([("red cube", "cube"), ("green cube", "cube"), ("blue bin", "bin"), ("mug", "")])]
    layout = ObjectLayout(tuple(slots), None, SIMULATOR_SCALES)
    assert layout.name_groups() == [["red cube", "green cube"]]  # one bin, or no kind: no group
    ds = open_dataset(dataset)
    groups = dataset_policy_config(ds, {**TINY, "state_key": KEYS}).name_slots
    assert [g[0] for g in groups] == ["red cube", "blue bin", "left zone"]
    assert "cyan cube" in groups[0] and "grey bin" in groups[1] and groups[2] == ["left zone", "right zone"]
    given = [["red cube", "green cube"]]
    assert dataset_policy_config(ds, {**TINY, "state_key": KEYS, "name_slots": given}).name_slots == given
    assert dataset_policy_config(ds, {**TINY, "state_key": KEYS, "object_name_slots": False}).name_slots == []
    assert dataset_policy_config(ds, {**TINY, "state_key": "observation.state"}).name_slots == []  # no objects


def test_fine_offsets_tell_a_gripper_beside_a_cube_from_one_above_it(dataset: Path) -> None:
    """The object features the action expert reads: 2 cm off is a small change of the plain offset
    (its normalisation spans the table) and a large one of the magnified features."""
    ds = open_dataset(dataset)
    built = build_fresh(ds, {**TINY, "state_key": KEYS}, eval_fraction=0.0, seed=0)
    model, processor = built.model, built.processor
    assert model.cfg.fine_offsets and model.object_in[0].in_features == 13
    names = model.cfg.state_names
    state = torch.zeros(2, len(names))
    cube = names.index("red_cube.x")
    state[:, names.index("ee.x")] = 0.30
    state[0, cube], state[1, cube] = 0.30, 0.32  # above the cube, then 2 cm beside it
    seen: list[torch.Tensor] = []
    hook = model.object_in.register_forward_hook(lambda m, args, out: seen.append(args[0]))
    ids = torch.tensor([[model.cfg.object_tokens[0][0]]])
    model.named_objects(ids.expand(2, 1), processor.model_state(state))
    hook.remove()
    read = seen[0][:, 0]  # (2, 13): the red cube's features in both states
    plain, fine = (read[1, 4] - read[0, 4]).abs(), (read[1, 7:] - read[0, 7:]).abs().max()
    assert plain < 0.2 and fine > 0.5
