"""What makes the learned low level act (docs/policy.md, "What made the low level act"): the named
objects of the state and the words that ground them, relative actions, pause-free chunks, the last
motion, the extra low-level batch, and checkpoints of the format before them."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from policy_helpers import (  # noqa: F401  (autouse fixture)
    TINY,
    TINY_FLAGS,
    batch_of,
    easy_privileged_dataset,
    find,
    items,
    one_thread,
    pinned_done_head,
    steerable_cli,
)
from steerable.control import Observation
from steerable.dataset import open_dataset
from steerable.policy.checkpoint import latest_checkpoint, load_policy
from steerable.policy.config import PolicyConfig
from steerable.policy.data import action_components, fit_normalizer
from steerable.policy.episodes import EpisodeActions
from steerable.policy.inference import PolicyObservation, PolicyRunner
from steerable.policy.objects import object_layout, object_tokens
from steerable.policy.setup import build_fresh
from steerable.recipes import load_recipe
from steerable.runtime.policy_adapter import PolicyLowLevel
from steerable.synthetic.privileged import ENVIRONMENT_STATE_FEATURE, ENVIRONMENT_STATE_NAMES

ROBOT = ["ee.x", "ee.y", "ee.z", "gripper.closure"]
NAMES = [*ROBOT, *ENVIRONMENT_STATE_NAMES]

# The recipe a checkpoint carries: the runner renders its prompts from it.
RECIPE_TEXT = Path(load_recipe("hierarchical").origin).read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return easy_privileged_dataset(tmp_path_factory, "acting")


@pytest.fixture(scope="module")
def built(dataset: Path) -> Any:
    torch.manual_seed(0)
    return build_fresh(open_dataset(dataset), {**TINY, "cameras": ["none"]}, eval_fraction=0.0, seed=0)


def test_the_object_description_places_its_objects_and_the_end_effector_in_the_state(built: Any) -> None:
    layout = object_layout(built.model.cfg)
    assert layout is not None and layout.end_effector == (0, 1, 2)
    slots = layout.objects
    assert [s.name for s in slots][:2] == ["red cube", "green cube"] and len(slots) == 11
    red, bin_ = slots[0], next(s for s in slots if s.name == "blue bin")
    assert red.axes == (4, 5, 6) and red.present == 7
    assert bin_.axes[2] is None and bin_.present is not None
    # The robot's state alone holds no object of the description: none to ground.
    assert object_layout(built.model.cfg.override(objects={})) is None


def test_only_words_that_name_one_object_ground_it(built: Any) -> None:
    tok = built.processor.tokenizer
    layout = object_layout(built.model.cfg)
    assert layout is not None
    found = object_tokens([o.name for o in layout.objects], tok)
    words = [[tok.decode([t]) for t in ids] for ids in found]
    assert words[0] == [" red"]
    # Only whole words count: a word this small vocabulary splits into pieces names nothing.
    for slot, ids in zip(layout.objects, found, strict=True):
        for t in ids:
            assert tok.decode([t]).strip() in slot.name.split()
    shared = set(tok(" cube", add_special_tokens=False)["input_ids"])
    assert not shared & {t for ids in found for t in ids}  # "cube" names six objects: none of them
    assert built.model.cfg.object_tokens == found  # the built policy carries them in its config


def test_the_expert_reads_the_state_of_the_object_a_word_names_and_nothing_else(built: Any) -> None:
    model, proc = built.model, built.processor
    tok = proc.tokenizer
    ids = torch.tensor([tok("pick up the red cube", add_special_tokens=False)["input_ids"]])
    red = tok(" red", add_special_tokens=False)["input_ids"]
    state = torch.zeros(1, len(NAMES))
    state[0, 4:8] = torch.tensor([0.2, 0.2, 0.0, 1.0])
    moved = state.clone()
    moved[0, 4] = 0.3  # the red cube moves
    other = state.clone()
    other[0, 8:12] = torch.tensor([0.4, 0.1, 0.0, 1.0])  # the green cube appears
    with torch.no_grad():
        a, b, c = (model.named_objects(ids, proc.model_state(s)) for s in (state, moved, other))
    changed = (a - b).abs().sum(-1)[0] > 0
    assert changed.tolist() == [t in red for t in ids[0].tolist()]
    assert torch.equal(a, c)  # an object the command does not name changes nothing
    assert a is not None and (a[0].abs().sum(-1) > 0).tolist() == [t in red for t in ids[0].tolist()]
    # The text the backbone reads does not depend on the objects: only the expert's context does.
    mask = torch.ones_like(ids)
    enc_a, enc_b = (model.encode(None, proc.model_state(s), ids, mask) for s in (state, moved))
    plen = enc_a.prefix_len
    assert torch.equal(enc_a.hidden[0][:, plen:], enc_b.hidden[0][:, plen:])
    ctx_a, valid = model.contexts(enc_a)
    assert ctx_a[0].shape[1] == valid.shape[1] == plen + ids.shape[1] + 1  # + the state token


def test_relative_actions_round_trip_and_are_offsets_from_the_state(built: Any) -> None:
    proc, cfg = built.processor, built.model.cfg
    assert cfg.action_mode == "relative" and cfg.relative_pairs == [(0, 0), (1, 1), (2, 2)]  # not the gripper
    state = torch.rand(3, len(NAMES))
    actions = torch.rand(3, cfg.chunk_size, 4)
    model = proc.model_actions(actions, state)
    assert torch.allclose(proc.robot_actions(model, state), actions, atol=1e-5)
    shifted = state.clone()
    shifted[:, :3] += 0.1
    moved = actions.clone()
    moved[..., :3] += 0.1
    assert torch.allclose(proc.model_actions(moved, shifted), model, atol=1e-5)  # translation-invariant
    legacy = cfg.override(action_mode="absolute")
    assert legacy.relative_pairs == [] and legacy.pose_pairs == cfg.relative_pairs


def test_pauses_train_no_actions_and_chunks_skip_them() -> None:
    cfg = PolicyConfig(state_dim=4, action_dim=4, state_names=ROBOT, action_names=ROBOT, chunk_size=3,
                       n_action_steps=3)
    a = np.array([[0, 0, 0, 0], [1, 0, 0, 0], [1, 0, 0, 0], [1, 0, 0, 0], [2, 0, 0, 0], [4, 0, 0, 1],
                  [4, 0, 0, 1], [4, 0, 0, 1]], np.float32)
    acts = EpisodeActions(a, cfg)
    assert acts.kept.tolist() == [0, 1, 4, 5, 6, 7]  # the final stillness stays: hold at the end
    chunk, mask = acts.chunk(1)
    assert chunk[:, 0].tolist() == [1, 2, 4] and mask.all()
    assert not acts.chunk(2)[1].any()  # a pause frame trains no action
    chunk, mask = acts.chunk(6)
    assert chunk[:, 0].tolist() == [4, 4, 4] and mask[:, 0].tolist() == [True, True, False]
    assert acts.motion(5).tolist() == [1, 0, 0] and acts.motion(1).tolist() == [0, 0, 0]
    kept_all = EpisodeActions(a, cfg.override(skip_pauses=False))
    assert kept_all.kept.tolist() == list(range(8)) and kept_all.motion(4).tolist() == [0, 0, 0]


def test_normaliser_fits_what_the_model_reads_and_predicts(dataset: Path, built: Any) -> None:
    ds, cfg = open_dataset(dataset), built.model.cfg
    norm = fit_normalizer(ds, cfg, [0, 1])
    assert len(norm.motion_std) == 3 and len(norm.offset_std) == 3 and len(norm.action_std) == 4
    # Offsets from the state over a chunk: their spread is far below the table's width.
    assert max(norm.action_std[:3]) < 0.1 and norm.action_std[3] > 0.1
    state = torch.zeros(2, len(NAMES))
    assert built.processor.model_state(state).shape == (2, len(NAMES) + 3 + 3 * 11)


def test_low_level_items_come_from_the_action_component_on_moving_frames(dataset: Path, built: Any) -> None:
    ds = open_dataset(dataset)
    recipe = load_recipe("hierarchical")
    assert action_components(recipe) == ["low_level_execution"]
    from steerable.policy.data import PolicyDataset

    data = PolicyDataset(ds, recipe, built.model.cfg, built.processor.image_size, component="low_level_execution")
    everything = items(ds, built)
    assert 0 < len(data.positions) < len(everything.positions)
    assert len(data) == len(data.positions) + len(data.done_items) + len(data.check_items) and data.done_items
    for i in range(0, len(data.positions), 17):
        item = data[i]
        assert item is not None and item["message_streams"] == ["low_level"] and item["action_mask"].any()
        assert item["motion"].shape == (3,) and float(item["done"]) in (-1.0, 0.0, 1.0)
    # The done head's positives: the previous command on the next one's first frames, no action loss.
    position, command = data.done_items[0]
    item = data[len(data.positions)]
    assert item is not None and item["messages"][0]["content"] == command and float(item["done"]) == 1.0
    assert not item["action_mask"].any()
    batch = built.processor.training_batch(batch_of(data, [0, 1, 2]))
    assert batch["state"].shape[1] == len(NAMES) + 3 + 33 and batch["actions"].shape == (3, TINY["chunk_size"], 4)


def test_the_adapter_hands_the_last_motion_to_the_next_chunk(built: Any, tmp_path: Path) -> None:
    from steerable.policy.checkpoint import save_checkpoint

    where = save_checkpoint(tmp_path, 1, built.model, built.processor, RECIPE_TEXT)
    seen: list[Any] = []

    class Watched(PolicyRunner):
        """Records the motion each chunk is asked with; never done: this test follows the motion."""

        def act_and_done(self, commands: Sequence[str], observation: PolicyObservation, steps: int | None = None
                         ) -> tuple[np.ndarray, np.ndarray | None]:
            seen.append(observation.get("motion"))
            return super().act_and_done(commands, observation, steps)[0], None

    low = PolicyLowLevel(Watched(load_policy(where)))
    assert low.reports_done
    from steerable.synthetic.env import SimEnv

    env = SimEnv(cameras=())
    env.reset(seed=3)
    obs = env.observe(render=False)
    first = low.act(obs, "pick up the red cube").actions
    assert seen[-1] is None  # the first chunk starts at rest
    # The robot executed the whole chunk: it stands at the last action; the motion is its last step.
    low.act(Observation(state=first[-1].copy(), environment_state=obs.environment_state), "pick up the red cube")
    assert np.allclose(seen[-1], first[-1][:3] - first[-2][:3])
    # The loop dropped the chunk after two actions: the motion is the step into the second.
    second = runner_chunk = low._sent
    assert runner_chunk is not None
    low.act(Observation(state=second[2].copy(), environment_state=obs.environment_state), "pick up the red cube")
    assert np.allclose(seen[-1], second[2][:3] - second[1][:3])
    low.reset()
    low.act(obs, "pick up the red cube")
    assert seen[-1] is None


@pytest.mark.parametrize("guided", [False, True])
def test_the_done_head_ends_a_command_with_and_without_rtc_guidance(built: Any, tmp_path: Path, guided: bool) -> None:
    """A command is reported complete when the done head says so, also when the chunk continues the
    queued motion (`--inference rtc`): else a learned high level waits on the low level forever."""
    from steerable.control import ChunkPrefix
    from steerable.policy.checkpoint import save_checkpoint
    from steerable.synthetic.env import SimEnv

    runner = PolicyRunner(load_policy(save_checkpoint(tmp_path, 1, built.model, built.processor, RECIPE_TEXT)))
    low = PolicyLowLevel(runner)
    env = SimEnv(cameras=())
    env.reset(seed=3)
    obs = env.observe(render=False)
    queued = np.repeat(obs.state[None], 4, axis=0).astype(np.float32)
    prefix = ChunkPrefix(queued, np.array([1.0, 1.0, 0.5, 0.1], np.float32), delay=2) if guided else None
    for finished in (True, False):
        with pinned_done_head(runner.model, finished):
            command = "pick up the red cube"
            chunk = low.act_continuing(obs, command, prefix) if prefix else low.act(obs, command)
        assert chunk.done is finished and (len(chunk.actions) == 0) is finished


def test_a_checkpoint_of_the_format_before_loads_and_acts_as_it_did(built: Any, tmp_path: Path) -> None:
    """Format 1 had no names, no object tokens and absolute actions: loaded now, the same network."""
    from steerable.policy.checkpoint import save_checkpoint
    from steerable.policy.config import UNSAVED_BEFORE

    newer = {"state_names", "action_names", "objects", "object_tokens", "done_loss_weight", *UNSAVED_BEFORE}
    old = {k: v for k, v in built.model.cfg.to_dict().items() if k not in newer}
    old_cfg = PolicyConfig.from_dict({**old, **UNSAVED_BEFORE})
    assert old_cfg.relative_pairs == [] and old_cfg.motion_dim == 0
    from steerable.policy.backbone import build_backbone
    from steerable.policy.model import HierarchicalPolicy
    from steerable.policy.processor import Processor

    torch.manual_seed(0)
    backbone, size = build_backbone(old_cfg, len(built.processor.tokenizer))
    model = HierarchicalPolicy(old_cfg, backbone)
    assert model.object_in is None and model.expert_state is None
    assert model.state_proj is not None and model.state_proj.in_features == len(NAMES)
    norm = built.processor.normalizer
    processor = Processor(old_cfg, built.processor.tokenizer, type(norm)(norm.state_min, norm.state_max,
                                                                          norm.action_mean, norm.action_std), size)
    where = save_checkpoint(tmp_path, 1, model, processor, RECIPE_TEXT)
    config = json.loads((where / "config.json").read_text())
    legacy = {"format": 1, "policy": old, "image_size": size}
    (where / "config.json").write_text(json.dumps(legacy))
    loaded = load_policy(where)
    assert loaded.model.object_in is None and loaded.model.cfg.relative_pairs == []
    obs = {"state": np.zeros(len(NAMES), np.float32), "images": {}}
    a = PolicyRunner(loaded).act(["pick up the red cube"], obs)
    (where / "config.json").write_text(json.dumps(config))
    b = PolicyRunner(load_policy(where)).act(["pick up the red cube"], obs)
    assert np.allclose(a, b)
    (where / "config.json").write_text(json.dumps({"format": 9, "policy": old}))
    from steerable.errors import ConfigError

    with pytest.raises(ConfigError, match="format 9"):
        load_policy(where)


def test_train_adds_a_low_level_batch_and_records_it(dataset: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    trained = steerable_cli("train", "--dataset", str(dataset), "--output_dir", str(out), "--steps", "2",
                         "--batch_size", "4", "--action_batch_size", "4", "--no_progress", "--eval_every", "100",
                         *TINY_FLAGS)
    assert trained.returncode == 0, trained.stderr
    where = latest_checkpoint(out)
    assert where is not None
    state = json.loads((where / "trainer_state.json").read_text())
    assert state["action_batch_size"] == 4
    config = json.loads((where / "config.json").read_text())
    # `--policy.state_key` auto: the privileged state joins the robot state on a dataset that has it.
    assert config["state_key"] == f"observation.state,{ENVIRONMENT_STATE_FEATURE}"
    assert config["state_names"][:4] == ROBOT and len(config["object_tokens"]) == 11
