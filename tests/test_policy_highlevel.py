"""The hierarchical policy's high level: event frames oversampled for the reply component, the plan
written from task + memory, progress read from the observation under a learned low level, and the
task mix a checkpoint was trained on (what `run --eval_episodes` scores it on by default)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from policy_helpers import TINY, TINY_FLAGS, build, one_thread  # noqa: F401  (autouse fixture)
from steerable.dataset import open_dataset
from steerable.policy.checkpoint import save_checkpoint, trained_on
from steerable.policy.config import PolicyConfig
from steerable.policy.data import PolicyDataset, event_components
from steerable.policy.generation import ParsedReply
from steerable.recipes import load_recipe
from steerable.recipes.live import LivePrompts
from steerable.synthetic import generate_synthetic


@pytest.fixture(scope="module")
def oracle(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Four easy episodes with oracle language, every one with a redirect (an interjection + `say`)."""
    root = tmp_path_factory.mktemp("hl") / "ds"
    generate_synthetic(root, episodes=4, seed=3, difficulty="realistic", with_language=True, interjection_rate=1.0)
    return open_dataset(root)


def test_the_reply_component_is_the_one_that_reads_events() -> None:
    assert event_components(load_recipe("hierarchical")) == ["interjection_response"]
    assert event_components(load_recipe("hierarchical").blend["plan"]) == []  # type: ignore[index]


def test_event_frames_are_repeated_through_the_reply_component(oracle: Any) -> None:
    built = build(oracle)
    recipe = load_recipe("hierarchical")
    plain = PolicyDataset(oracle, recipe, built.model.cfg, built.processor.image_size)
    repeated = PolicyDataset(oracle, recipe, built.model.cfg, built.processor.image_size, event_repeat=3)
    assert plain.extra == []
    events = sorted({pos for pos, _ in repeated.extra})
    assert events and len(repeated.extra) == 3 * len(events) == len(repeated) - len(plain)
    for k in range(len(plain), len(repeated)):
        item = repeated[k]
        assert item is not None and item["target_message_indices"]
        target = item["messages"][item["target_message_indices"][0]]
        user = [m["content"] for m in item["messages"] if m["role"] == "user"]
        assert any(c.startswith("Plan:") for c in user)  # the plan before the correction ...
        assert target["tool_calls"][0]["function"]["name"] == "say"  # ... and the reply says so
        assert item["actions"].shape[0] == built.model.cfg.chunk_size
    # Only the held-in episodes' event frames are added.
    held_in = PolicyDataset(oracle, recipe, built.model.cfg, built.processor.image_size, episodes=[0], event_repeat=2)
    assert {repeated.frames.locate(p)[0] for p, _ in held_in.extra} == {0}


def test_the_plan_sample_carries_the_memory_so_its_target_is_defined_by_text(tmp_path: Path) -> None:
    # Without corrections: after one, the plan samples are left out (tests/test_recipe_corrections.py).
    generate_synthetic(tmp_path / "ds", episodes=1, seed=3, difficulty="realistic", with_language=True,
                       interjection_rate=0.0)
    plain = open_dataset(tmp_path / "ds")
    built = build(plain)
    plan_only = load_recipe("hierarchical").blend["plan"]  # type: ignore[index]
    data = PolicyDataset(plain, plan_only, built.model.cfg, built.processor.image_size, episodes=[0])
    first, later = data[0], data[len(data.positions) - 1]
    later_user = [m["content"] for m in later["messages"] if m["role"] == "user"]
    assert [m["content"] for m in first["messages"]][:2] == [first["task"], "Write the plan."]
    assert later_user[1].startswith("Memory: ") and later_user[-1] == "Write the plan."
    # Without memory the whole plan: the first plan has more steps than the last one.
    full = first["messages"][first["target_message_indices"][0]]["content"]
    rest = later["messages"][later["target_message_indices"][0]]["content"]
    assert len(full.splitlines()) > len(rest.splitlines())


class _Scripted:
    """Stands in for a PolicyRunner: answers by the last user turn, records every prompt."""

    def __init__(self, answers: dict[str, str]) -> None:
        self.answers = answers
        self.asked: list[list[str]] = []
        self.cfg = PolicyConfig()
        self.prompts = LivePrompts(load_recipe("hierarchical"))

    def generate(self, chats: Any, observation: Any, generation: Any = None, canonical: bool = False
                 ) -> list[ParsedReply]:
        turns = [m["content"] for m in chats[0]]
        self.asked.append(turns)
        for key, answer in self.answers.items():
            if key in turns[-1]:
                return [ParsedReply(answer)]
        return [ParsedReply("?")]


def test_over_a_learned_low_level_progress_is_read_from_the_observation() -> None:
    from steerable.control import HighLevelRequest, LanguageContext, Observation
    from steerable.runtime.policy_high_level import PolicyHighLevel

    task = "put the red cube in the grey bin"
    runner = _Scripted({"Which step now?": "pick up the red cube", "Write the plan.": "1. pick up\n2. place",
                        "Just finished": "updated"})
    high = PolicyHighLevel(runner, progress_from_observation=True)
    obs = Observation(state=np.zeros(4, np.float32))
    first = high.update(HighLevelRequest("update", LanguageContext(task=task), obs))
    assert runner.asked[0] == [task, "Which step now?"]
    assert (first.subtask, first.plan, first.memory) == ("pick up the red cube", "1. pick up\n2. place", None)
    # Same step observed: nothing finished, nothing rewritten.
    ctx = LanguageContext(task=task, subtask="pick up the red cube", plan="1. pick up\n2. place")
    runner.asked.clear()
    same = high.update(HighLevelRequest("update", ctx, obs))
    assert len(runner.asked) == 1 and (same.plan, same.memory) == (None, None)
    # The observation shows the next step: the one before is finished (memory and plan follow).
    runner.answers["Which step now?"] = "place the red cube in the grey bin"
    runner.asked.clear()
    moved = high.update(HighLevelRequest("update", ctx, obs))
    assert moved.subtask == "place the red cube in the grey bin"
    assert moved.memory == "updated" and moved.plan == "updated"
    assert [t[-1] for t in runner.asked[1:]] == ["Just finished: pick up the red cube"] * 2


def test_the_plan_is_rewritten_from_task_and_memory_when_it_is_missing() -> None:
    from steerable.control import HighLevelRequest, LanguageContext, Observation
    from steerable.runtime.policy_high_level import PolicyHighLevel

    runner = _Scripted({"Write the plan.": "1. place the red cube in the bin",
                        "Plan:": "place the red cube in the bin"})
    high = PolicyHighLevel(runner)
    ctx = LanguageContext(task="put the red cube in the bin", memory="Holding the red cube.")
    out = high.update(HighLevelRequest("update", ctx, Observation(state=np.zeros(4, np.float32))))
    assert runner.asked[0] == ["put the red cube in the bin", "Memory: Holding the red cube.", "Write the plan."]
    assert out.plan == "1. place the red cube in the bin"


def test_a_checkpoint_records_the_task_mix_it_was_trained_on(oracle: Any, tmp_path: Path) -> None:
    from steerable.policy.settings import TrainConfig
    from steerable.policy.trainer import train

    out = tmp_path / "run"
    train(TrainConfig(dataset=oracle.root, output_dir=out, policy=dict(TINY), steps=2, batch_size=4,
                      eval_every=2, save_every=2, eval_fraction=0.25, eval_text_cases=2, progress=False))
    assert trained_on(out) == {"dataset": str(oracle.root), "synthetic_difficulty": "realistic"}
    config = json.loads(next((out / "checkpoints").glob("step_*/config.json")).read_text())
    assert config["trained_on"]["synthetic_difficulty"] == "realistic"
    # A checkpoint written without it (older ones, or by hand) reads as unknown.
    built = build(oracle)
    bare = save_checkpoint(tmp_path / "bare", 1, built.model, built.processor, "blend: {}\n")
    assert trained_on(bare) == {} and trained_on(tmp_path / "nothing") == {}


def test_run_evaluates_a_policy_on_its_training_mix_unless_told(oracle: Any, tmp_path: Path) -> None:
    import subprocess
    import sys

    out = tmp_path / "run"
    base = [sys.executable, "-m", "steerable.cli.main"]
    subprocess.run([*base, "train", "--dataset", str(oracle.root), "--output_dir", str(out), "--steps", "1",
                    "--batch_size", "4", "--no_progress", *TINY_FLAGS], check=True, capture_output=True, timeout=240)
    run = [*base, "run", "--env", "sim", "--high_level", "scripted", "--low_level", "policy", "--policy.path",
           str(out), "--eval_episodes", "1", "--max_seconds", "1", "--workers", "1", "--json"]
    mine = subprocess.run(run, capture_output=True, text=True, timeout=240)
    assert mine.returncode == 0, mine.stderr
    assert json.loads(mine.stdout.strip().splitlines()[-1])["difficulty"] == "realistic"
    told = subprocess.run([*run, "--eval_difficulty", "easy"], capture_output=True, text=True, timeout=240)
    assert json.loads(told.stdout.strip().splitlines()[-1])["difficulty"] == "easy"


def test_a_periodic_update_with_nothing_new_keeps_the_subtask_without_asking() -> None:
    from steerable.control import HighLevelRequest, LanguageContext, Observation
    from steerable.runtime.policy_high_level import PolicyHighLevel

    task = "put the red cube in the grey bin"
    runner = _Scripted({"Write the plan.": "1. pick up the red cube\n2. place", "Plan:": "pick up the red cube"})
    high = PolicyHighLevel(runner)
    obs = Observation(state=np.zeros(4, np.float32))
    first = high.update(HighLevelRequest("update", LanguageContext(task=task), obs))
    ctx = LanguageContext(task=task, subtask=first.subtask, plan=first.plan)
    runner.asked.clear()
    steady = high.update(HighLevelRequest("update", ctx, obs))
    assert runner.asked == [] and steady.subtask is None  # same context: the subtask stands
    # A new plan (an interjection's) or the controller's "done" asks again.
    revised = LanguageContext(task=task, subtask=first.subtask, plan="1. pick up the red cube\n2. place elsewhere")
    assert high.update(HighLevelRequest("update", revised, obs)).subtask == "pick up the red cube"
    runner.asked.clear()
    high.update(HighLevelRequest("update", ctx, obs, controller_done=True))
    assert runner.asked


def test_decoded_frames_are_kept_by_size_not_by_episode_count(oracle: Any) -> None:
    """A miss decodes a whole episode: with more episodes than an episode-count cache held (256 of
    500), every draw was a decode and training ran 30x slower. The cache is sized in bytes."""
    built = build(oracle)
    recipe = load_recipe("hierarchical")
    episodes = [e.episode_index for e in oracle.episodes]
    data = PolicyDataset(oracle, recipe, built.model.cfg, built.processor.image_size)
    for ep in episodes * 2:
        data._episode_images(ep)
    assert list(data._images) == episodes  # all kept: a few KB a frame
    one = sum(t.nelement() for t in data._images[episodes[0]].values())
    small = PolicyDataset(oracle, recipe, built.model.cfg, built.processor.image_size, image_cache_bytes=2 * one)
    for ep in episodes:
        small._episode_images(ep)
    assert 1 <= len(small._images) <= 2 and list(small._images)[-1] == episodes[-1]
    assert small._image_bytes == sum(t.nelement() for f in small._images.values() for t in f.values())
