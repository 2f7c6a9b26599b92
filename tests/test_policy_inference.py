"""Inference: KV-cached generation, stops and budgets, tool-call parsing, checkpoints that round-trip,
the runtime adapters and LeRobot's policy interface."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from policy_helpers import (  # noqa: F401  (one_thread: an autouse fixture)
    batch_of,
    build,
    find,
    items,
    one_thread,
    pinned_done_head,
    scripted_text,
)
from steerable.control import LanguageContext
from steerable.dataset import open_dataset
from steerable.errors import ConfigError, WriteError
from steerable.policy.checkpoint import latest_checkpoint, load_policy, save_checkpoint
from steerable.policy.generation import GenerationConfig, generate_ids, parse_reply
from steerable.policy.inference import PolicyRunner
from steerable.recipes import load_recipe
from steerable.recipes.live import LivePrompts
from train_data import annotate_synthetic

RECIPE_TEXT = Path(load_recipe("hierarchical").origin).read_text(encoding="utf-8")
PROMPTS = LivePrompts(load_recipe("hierarchical"))


def subtask_prompt(task: str, plan: str | None = None, memory: str | None = None) -> list[dict[str, Any]]:
    """The recipe's prompt for the subtask from task (+ plan + memory), as the runtime asks it."""
    return PROMPTS.render("subtask", LanguageContext(task=task, plan=plan, memory=memory)).messages


@pytest.fixture(scope="module")
def ds(tmp_path_factory: pytest.TempPathFactory) -> Any:
    root = tmp_path_factory.mktemp("policy_inf") / "ds"
    annotate_synthetic(root, episodes=2)
    return open_dataset(root)


@pytest.fixture(scope="module")
def built(ds: Any) -> Any:
    return build(ds)


@pytest.fixture(scope="module")
def checkpoint(built: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("ckpt")
    return save_checkpoint(out, 3, built.model, built.processor, RECIPE_TEXT)


def _obs(built: Any, n: int = 1, seed: int = 0) -> dict[str, Any]:
    g = torch.Generator().manual_seed(seed)
    images = {c: torch.randint(0, 255, (n, 40, 48, 3), generator=g, dtype=torch.uint8) for c in built.model.cfg.cameras}
    return {"images": images, "state": torch.rand(n, 4, generator=g)}


def _prompts(built: Any, chats: list[Any]) -> tuple[dict[str, Any], torch.Tensor, torch.Tensor]:
    obs = built.processor.observation(_obs(built, len(chats)))
    ids, mask = built.processor.prompt(chats, generation=True)
    return obs, ids, mask


def test_kv_cache_gives_the_same_tokens_as_recomputing(built: Any) -> None:
    chats = [subtask_prompt("put the red cube in the bin"), subtask_prompt("stack it", "1. reach", "done: reach")]
    obs, ids, mask = _prompts(built, chats)
    assert mask.sum(1).tolist()[0] != mask.sum(1).tolist()[1]  # different lengths: one is padded
    eos = built.processor.eos_id
    for gen in (GenerationConfig(max_new_tokens=12), GenerationConfig(max_new_tokens=12, temperature=1.0, seed=3)):
        cached = generate_ids(built.model, obs["images"], obs["state"], ids, mask, gen, eos)
        slow = generate_ids(built.model, obs["images"], obs["state"], ids, mask,
                            GenerationConfig(**{**vars(gen), "use_cache": False}), eos)
        assert cached == slow
    # Batching changes nothing: each prompt alone gives its batched output.
    both = generate_ids(built.model, obs["images"], obs["state"], ids, mask, GenerationConfig(max_new_tokens=12), eos)
    for i in range(2):
        n = int(mask[i].sum())
        alone = generate_ids(built.model, obs["images"][i:i + 1], obs["state"][i:i + 1], ids[i:i + 1, :n],
                             mask[i:i + 1, :n], GenerationConfig(max_new_tokens=12), eos)
        assert alone[0] == both[i]


def test_budget_stop_strings_and_sampling(built: Any) -> None:
    obs, ids, mask = _prompts(built, [subtask_prompt("put the cube in the bin")])
    eos = -1  # never stop on EOS: the budget must
    out = generate_ids(built.model, obs["images"], obs["state"], ids, mask, GenerationConfig(max_new_tokens=5), eos)
    assert len(out[0]) == 5
    decode = built.processor.decode
    text = decode(out[0])
    stop = text[2:4] if len(text) >= 4 else text
    stopped = generate_ids(built.model, obs["images"], obs["state"], ids, mask,
                           GenerationConfig(max_new_tokens=5, stop=(stop,)), eos, decode)
    assert stop in decode(stopped[0]) and len(stopped[0]) <= 5
    a = generate_ids(built.model, obs["images"], obs["state"], ids, mask,
                     GenerationConfig(max_new_tokens=8, temperature=1.5, seed=7), eos)
    b = generate_ids(built.model, obs["images"], obs["state"], ids, mask,
                     GenerationConfig(max_new_tokens=8, temperature=1.5, seed=7), eos)
    assert a == b


def test_tool_calls_are_parsed_and_checked_against_the_catalog() -> None:
    catalog = [{"type": "function", "function": {"name": "wave", "parameters": {"required": ["times"]}}}]
    text = ('1. grasp\n2. place gently<tool_call>{"name": "say", "arguments": {"text": "Sure."}}</tool_call>'
            '<tool_call>{"name": "wave", "arguments": {"times": 2}}</tool_call>'
            '<tool_call>{"name": "launch", "arguments": {}}</tool_call><tool_call>{oops</tool_call>'
            '<tool_call>{"name": "wave", "arguments": {}}</tool_call><say>On it</say>')
    reply = parse_reply(text, catalog)
    assert reply.text == "1. grasp\n2. place gently"
    assert reply.say == ["Sure.", "On it"]
    assert [c["function"]["name"] for c in reply.tool_calls] == ["say", "wave", "say"]
    assert len(reply.rejected) == 3 and any("launch" in r for r in reply.rejected)


def test_checkpoint_round_trips_to_identical_outputs(built: Any, checkpoint: Path, ds: Any) -> None:
    assert latest_checkpoint(checkpoint.parent.parent) == checkpoint
    loaded = load_policy(checkpoint.parent.parent)
    data = items(ds, built)
    batch = batch_of(data, find(data, "text", 2) + find(data, "actions", 2))
    a, b = built.processor.training_batch(batch), loaded.processor.training_batch(batch)
    assert all(torch.equal(a[k], b[k]) for k in ("input_ids", "labels", "state", "images", "actions"))
    built.model.eval()
    out_a = built.model(a, generator=torch.Generator().manual_seed(0))
    out_b = loaded.model(b, generator=torch.Generator().manual_seed(0))
    assert all(torch.equal(out_a[k], out_b[k]) for k in ("loss", "text_loss", "flow_loss"))
    noise = torch.randn(4, built.model.cfg.chunk_size, built.model.cfg.action_dim)
    args = (a["images"], a["state"], a["input_ids"], a["attention_mask"])
    assert torch.equal(built.model.sample_actions(*args, noise=noise), loaded.model.sample_actions(*args, noise=noise))
    obs, ids, mask = _prompts(built, [subtask_prompt("put the cube in the bin")])
    gen = GenerationConfig(max_new_tokens=10)
    assert generate_ids(built.model, obs["images"], obs["state"], ids, mask, gen, 0) == \
        generate_ids(loaded.model, obs["images"], obs["state"], ids, mask, gen, 0)
    assert loaded.recipe_text == RECIPE_TEXT


_KILLED_SAVE = """
import os, signal, sys
from steerable.policy.checkpoint import load_policy, save_checkpoint
loaded = load_policy(sys.argv[1])
# SIGKILL in the middle of the save: the weights and config are written, the tokenizer is not.
loaded.processor.tokenizer.save_pretrained = lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL)
save_checkpoint(sys.argv[2], int(sys.argv[3]), loaded.model, loaded.processor, "killed")
"""


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_checkpoint_save_killed_midway_leaves_the_previous_one_whole(built: Any, tmp_path: Path) -> None:
    first = save_checkpoint(tmp_path, 1, built.model, built.processor, "r")
    before = _tree(first)
    for step in (2, 1):  # a new step, then a rewrite of the existing one
        killed = subprocess.run([sys.executable, "-c", _KILLED_SAVE, str(first), str(tmp_path), str(step)],
                                capture_output=True, text=True, timeout=240)
        assert killed.returncode == -9, killed.stderr
        left = list((tmp_path / "checkpoints").glob(".step_*.steerable-new-*"))
        assert left and (left[0] / "model.safetensors").is_file()  # it did die half-way through
        assert not (tmp_path / "checkpoints" / "step_00000002").exists()
        assert latest_checkpoint(tmp_path) == first and _tree(first) == before
        assert load_policy(tmp_path).recipe_text == "r"
    third = save_checkpoint(tmp_path, 3, built.model, built.processor, "r3")  # the next save clears the leftovers
    assert latest_checkpoint(tmp_path) == third
    assert not list((tmp_path / "checkpoints").glob(".step_*"))


def test_a_failed_save_changes_nothing(built: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = save_checkpoint(tmp_path, 1, built.model, built.processor, "r")
    before = _tree(first)

    def disk_full(*args: Any, **kwargs: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(built.processor.tokenizer, "save_pretrained", disk_full)
    with pytest.raises(WriteError, match="step_00000001.*no space left.*unchanged"):
        save_checkpoint(tmp_path, 1, built.model, built.processor, "overwrite")
    assert _tree(first) == before and latest_checkpoint(tmp_path) == first
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["latest", "step_00000001"]


def test_runtime_adapters_follow_the_protocols(checkpoint: Path, built: Any) -> None:
    from steerable.control import (
        HighLevelModel,
        HighLevelRequest,
        LanguageContext,
        LowLevelController,
        Observation,
    )
    from steerable.runtime.policy_adapter import load_high_level, load_low_level

    high, low = load_high_level(checkpoint), load_low_level(checkpoint)
    assert isinstance(high, HighLevelModel) and isinstance(low, LowLevelController)
    assert high.runner is low.runner  # one model in memory for both levels
    frames = {c: np.zeros((40, 48, 3), np.uint8) for c in built.model.cfg.cameras}
    obs = Observation(state=np.zeros(4, np.float32), images=frames)
    model, processor = high.runner.model, high.runner.processor
    # The text and the done head are pinned: an untrained model's words and done calls are noise.
    with scripted_text(model, processor, "1. pick up the cube\n2. place it in the bin"):
        update = high.update(HighLevelRequest("update", LanguageContext(task="put the cube in the bin"), obs))
        assert (update.subtask, update.plan) == ("pick up the cube", "1. pick up the cube\n2. place it in the bin")
        reply = high.update(HighLevelRequest("interjection", LanguageContext(task="t", plan="p"), obs,
                                             user_text="stop"))
        assert (reply.subtask, reply.plan) == (None, "1. pick up the cube\n2. place it in the bin")
    with pinned_done_head(model, done=False):
        chunk = low.act(obs, "pick up the cube")
    assert not chunk.done and chunk.actions.shape == (built.model.cfg.n_action_steps, 4)
    assert chunk.actions.dtype == np.float32 and np.isfinite(chunk.actions).all()
    with pinned_done_head(model, done=True):
        chunk = low.act(obs, "pick up the cube")
    assert chunk.done and chunk.actions.shape == (0, 4) and chunk.actions.dtype == np.float32
    with pytest.raises(ValueError, match="observation"):
        high.update(HighLevelRequest("update", LanguageContext(task="t"), None))


def test_lerobot_interface(checkpoint: Path, built: Any, ds: Any) -> None:
    from steerable.policy.lerobot import SteerablePolicy

    policy = SteerablePolicy.from_pretrained(checkpoint)
    cams = built.model.cfg.cameras
    batch = {c: torch.rand(2, 3, 40, 48) for c in cams}  # LeRobot layout: float (B, 3, H, W) in [0, 1]
    batch.update({"observation.state": torch.rand(2, 4), "task": ["put the cube in the bin", "stack the cube"]})
    policy.reset()
    chunk = policy.predict_action_chunk(batch)
    assert chunk.shape == (2, built.model.cfg.chunk_size, 4)
    assert len(policy.last_subtasks) == 2
    first = policy.select_action(batch)
    assert first.shape == (2, 4)
    policy.select_action(batch)  # n_action_steps = 2: the queue is now empty
    assert not policy._queue
    policy.reset()
    data = items(ds, built)
    train = batch_of(data, find(data, "text", 1) + find(data, "actions", 1))
    lerobot_batch = {**{k: v for k, v in train.items() if k not in ("images", "state", "actions", "action_mask")},
                     **{c: train["images"][c] for c in cams}, "observation.state": train["state"],
                     "action": train["actions"], "action_is_pad": ~train["action_mask"][..., 0]}
    loss, parts = policy.forward(lerobot_batch)
    assert loss.ndim == 0 and set(parts) == {"loss", "text_loss", "flow_loss"} and parts["text_loss"] > 0


def test_runner_rejects_a_missing_camera(checkpoint: Path) -> None:
    """A camera the policy reads and the observation lacks is a ConfigError of one line that names it."""
    runner = PolicyRunner(load_policy(checkpoint))
    with pytest.raises(ConfigError, match="camera") as info:
        runner.act(["pick up the cube"], {"state": np.zeros(4), "images": {}})
    assert "\n" not in str(info.value) and all(camera in str(info.value) for camera in runner.cfg.cameras)


def test_high_level_advances_memory_and_plan_when_the_controller_is_done(checkpoint: Path, built: Any) -> None:
    from steerable.control import HighLevelRequest, LanguageContext, Observation
    from steerable.policy.generation import ParsedReply
    from steerable.runtime.policy_adapter import load_low_level
    from steerable.runtime.policy_high_level import PolicyHighLevel

    asked: list[list[dict[str, Any]]] = []

    class Recording:
        """The checkpoint's runner, its replies scripted: a `TextPolicy` as it is."""

        def __init__(self, runner: PolicyRunner) -> None:
            self.cfg, self.prompts = runner.cfg, runner.prompts

        def generate(self, chats: Any, observation: Any, generation: Any = None,
                     canonical: bool = False) -> list[ParsedReply]:
            asked.append(chats[0])
            return [ParsedReply(f"reply {len(asked)}")]

    high = PolicyHighLevel(Recording(load_low_level(checkpoint).runner))
    obs = Observation(state=np.zeros(4, np.float32))
    task = "put the red cube in the bin"
    first = high.update(HighLevelRequest("update", LanguageContext(task=task), obs))
    assert [m["content"] for m in asked[0]] == [task, "Write the plan."]
    assert first.plan == "reply 1" and first.subtask == "reply 2" and first.memory is None
    assert [m["content"] for m in asked[1]] == [task, "Plan:\nreply 1"]
    asked.clear()
    ctx = LanguageContext(task=task, subtask="pick up the red cube", plan="1. pick up\n2. place", memory=None)
    done = high.update(HighLevelRequest("update", ctx, obs, controller_done=True))
    assert [m["content"] for m in asked[0]] == [task, "Just finished: pick up the red cube"]  # memory
    assert [m["content"] for m in asked[1]] == [task, "Plan:\n1. pick up\n2. place",
                                                "Just finished: pick up the red cube"]  # remaining plan
    assert [m["content"] for m in asked[2]] == [task, "Plan:\nreply 2", "Memory: reply 1"]  # next subtask
    assert (done.memory, done.plan, done.subtask) == ("reply 1", "reply 2", "reply 3")
    asked.clear()
    steady = high.update(HighLevelRequest("update", ctx, obs))
    # A numbered plan lists the remaining steps: its first step is the subtask, as written (no copy).
    assert not asked and steady.plan is None and steady.memory is None and steady.subtask == "pick up"
    prose = high.update(HighLevelRequest("update", LanguageContext(task=task, plan="first pick it up"), obs))
    assert len(asked) == 1 and prose.subtask == "reply 1"  # other words: the model writes the subtask
    asked.clear()
    last = LanguageContext(task=task, subtask="place the red cube in the bin", plan="1. place the red cube in the bin")
    finished = high.update(HighLevelRequest("update", last, obs, controller_done=True))
    assert finished.task_done and not asked  # the plan's last step is done: nothing left to write
    longer = LanguageContext(task=task, subtask="place the red cube in the bin",
                             plan="1. place the red cube in the bin\n2. place the red cube in the bin")
    assert not high.update(HighLevelRequest("update", longer, obs, controller_done=True)).task_done


def test_flow_noise_zero_acts_the_same_for_the_same_observation(checkpoint: Path, built: Any) -> None:
    """The default `flow_noise` 0 integrates from the prior's mean: one chunk per observation, whatever
    the generator; 1 samples; a checkpoint that predates the setting keeps sampling."""
    import json

    from steerable.policy.config import UNSAVED_BEFORE

    runner = PolicyRunner(load_policy(checkpoint))
    assert runner.cfg.flow_noise == 0.0
    obs = _obs(built)
    first = runner.act(["pick up the cube"], obs)
    runner.generator.manual_seed(123)
    assert np.array_equal(first, runner.act(["pick up the cube"], obs))
    runner.model.cfg.flow_noise = 1.0
    assert not np.allclose(runner.act(["pick up the cube"], obs), runner.act(["pick up the cube"], obs))
    assert UNSAVED_BEFORE["flow_noise"] == 1.0
    config = json.loads((checkpoint / "config.json").read_text())
    assert "flow_noise" in json.dumps(config)


def test_run_flow_noise_replaces_the_checkpoints(checkpoint: Path) -> None:
    from steerable.runtime.policy_adapter import load_low_level

    low = load_low_level(checkpoint, flow_noise=0.5)
    assert low.runner.cfg.flow_noise == 0.5
    low.runner.model.cfg.flow_noise = 0.0  # the module's runners are shared: put the default back
    bad = subprocess.run([sys.executable, "-m", "steerable.cli.main", "run", "--env", "sim", "--low_level", "policy",
                          "--policy.path", str(checkpoint), "--policy.flow_noise", "-1", "--eval_episodes", "1"],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "flow_noise" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1, bad.stderr
