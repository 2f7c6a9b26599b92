"""Name slots (`--policy.name_slots`, steerable.policy.names): a text-decided prompt names things
canonically, by order of first appearance, in training and at run time; the reply is mapped back to
the real names; prompts that read the scene keep their names."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from policy_helpers import TINY, TINY_FLAGS, build, one_thread  # noqa: F401  (autouse fixture)
from steerable.dataset import open_dataset
from steerable.errors import ConfigError
from steerable.policy.checkpoint import load_policy, save_checkpoint
from steerable.policy.data import PolicyDataset
from steerable.policy.generation import ParsedReply
from steerable.policy.inference import PolicyRunner
from steerable.policy.names import SLOT_COMPONENTS, NameSlots
from steerable.recipes import load_recipe
from steerable.synthetic import generate_synthetic
from steerable.synthetic.commands import CUBE_NAMES, DIRECTIONS, RECEPTACLE_NAMES
from steerable.train.samples import TASK_FALLBACK

GROUPS = [list(CUBE_NAMES), list(RECEPTACLE_NAMES), list(DIRECTIONS)]
SLOTS = NameSlots(GROUPS)


def _say(text: str) -> dict[str, Any]:
    return {"type": "function", "function": {"name": "say", "arguments": {"text": text}}}


def test_names_take_their_groups_slots_in_order_of_first_appearance() -> None:
    task = "push the cyan cube left, then put the pink cube in the left zone, then stack the cyan cube on the red cube"
    mapping = SLOTS.mapping([task])
    assert SLOTS.text(task, mapping) == ("push the red cube left, then put the green cube in the blue bin, then "
                                         "stack the red cube on the orange cube")
    # Within each group a permutation: the names the prompt does not mention take the slots left.
    for group in GROUPS:
        assert sorted(mapping[n] for n in group) == sorted(group)
    assert mapping["left zone"] == "blue bin" and mapping["left"] == "left"  # "left zone" is a place


def test_a_reply_is_mapped_back_to_the_real_names_text_and_say_alike() -> None:
    chat = [{"role": "user", "content": "put the pink cube in the grey bin"},
            {"role": "user", "content": "Not the grey bin, the yellow bin."}]
    renamed, mapping = SLOTS.canonical(chat)
    assert [m["content"] for m in renamed] == ["put the red cube in the blue bin", "Not the blue bin, the yellow bin."]
    reply = ParsedReply("1. place the red cube in the yellow bin", [_say("Moving the red cube to the yellow bin.")],
                        truncated=True)
    back = SLOTS.restore(reply, mapping)
    assert back.text == "1. place the pink cube in the yellow bin" and back.truncated
    assert back.say == ["Moving the pink cube to the yellow bin."]
    assert back.tool_calls[0]["function"]["name"] == "say"
    # A name the prompt never gave maps back to a real name the prompt did not give either.
    other = SLOTS.restore(ParsedReply("pick up the green cube"), mapping).text
    assert other != "pick up the pink cube" and re.fullmatch(r"pick up the \w+ cube", other)


def test_the_mapping_follows_the_prompt_not_the_answer() -> None:
    sample = [{"role": "user", "content": "put the cyan cube in the left zone"},
              {"role": "assistant", "content": "1. pick up the red cube\n2. place the cyan cube in the left zone"}]
    renamed, mapping = SLOTS.canonical(sample)
    assert mapping["cyan cube"] == "red cube" and mapping["red cube"] != "red cube"
    assert renamed[1]["content"] == f"1. pick up the {mapping['red cube']}\n2. place the red cube in the blue bin"


@pytest.mark.parametrize(
    ("groups", "message"),
    [([["red cube"]], "two or more"), ([["red cube", "red cube"]], "two or more"),
     ([["red cube", "blue bin"], ["blue bin", "grey bin"]], "in two groups"), ([["red cube", " "]], "empty")],
)
def test_bad_groups_are_refused(groups: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        NameSlots(groups)


@pytest.fixture(scope="module")
def oracle(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Realistic episodes (pushes, zones, 1-4 steps) with oracle language and a redirect in each."""
    root = tmp_path_factory.mktemp("slots") / "ds"
    generate_synthetic(root, episodes=4, seed=5, difficulty="realistic", with_language=True, interjection_rate=1.0)
    return open_dataset(root)


def test_training_renames_only_the_text_decided_components(oracle: Any) -> None:
    built = build(oracle, name_slots=GROUPS)
    slotted = PolicyDataset(oracle, load_recipe("hierarchical"), built.model.cfg, built.processor.image_size,
                            event_repeat=2)
    plain = PolicyDataset(oracle, load_recipe("hierarchical"), build(oracle).model.cfg, built.processor.image_size,
                          event_repeat=2)
    seen: set[str] = set()
    renamed = 0
    for i in range(0, len(slotted), 5):
        a, b = slotted[i], plain[i]
        if a is None:
            continue
        component = (slotted.frames.rendered(slotted.positions[i])[1] if i < len(slotted.positions)
                     else slotted.extra[i - len(slotted.positions)][1])
        seen.add(component)
        if "low_level" in a["message_streams"]:
            # A sample that trains actions is read against the real scene, whatever component was
            # drawn (a plan drawn where there is none falls back to the plain task's actions).
            assert a["messages"] == b["messages"], component
        if component not in SLOT_COMPONENTS:
            assert a["messages"] == b["messages"], component  # read from the scene: real names
            continue
        expected, mapping = SLOTS.canonical(b["messages"])
        assert a["messages"] == expected and a["task"] == SLOTS.text(b["task"], mapping)
        first = SLOTS.names_in([a["messages"][0]["content"]])
        cubes = [n for n in dict.fromkeys(first) if n in CUBE_NAMES]
        assert cubes == list(CUBE_NAMES[: len(cubes)])  # the task's cubes are the first slots, in order
        renamed += a["messages"] != b["messages"]
        assert np.array_equal(a["actions"].numpy(), b["actions"].numpy())
    assert {"plan", "progress", "low_level_execution", "interjection_response", TASK_FALLBACK} <= seen
    assert renamed > 10


def test_the_runtime_asks_canonically_and_reads_the_reply_in_real_names(oracle: Any, tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    import steerable.policy.inference as inference
    from steerable.control import HighLevelRequest, LanguageContext, Observation
    from steerable.runtime.policy_high_level import PolicyHighLevel

    built = build(oracle, name_slots=GROUPS)
    recipe_text = Path(load_recipe("hierarchical").origin).read_text(encoding="utf-8")
    path = save_checkpoint(tmp_path, 1, built.model, built.processor, recipe_text)
    loaded = load_policy(path)
    assert loaded.model.cfg.name_slots == GROUPS  # the checkpoint keeps them
    runner = PolicyRunner(loaded)
    prompts: list[str] = []
    replies = iter(["1. pick up the red cube\n2. place the red cube in the blue bin", "pick up the red cube"])

    def fake_generate_ids(model: Any, images: Any, state: Any, ids: Any, mask: Any, gen: Any, eos: int,
                          decode: Any, finished: list[bool]) -> list[list[int]]:
        prompts.append(runner.processor.decode(ids[0][mask[0].bool()].tolist()))
        finished.append(True)
        return [runner.processor.tokenizer.encode(next(replies), add_special_tokens=False)]

    monkeypatch.setattr(inference, "generate_ids", fake_generate_ids)
    high = PolicyHighLevel(runner)
    state = np.zeros(built.model.cfg.state_dim, np.float32)
    images = {cam: np.zeros((16, 16, 3), np.uint8) for cam in built.model.cfg.cameras}
    task = "put the pink cube in the left zone"
    out = high.update(HighLevelRequest("update", LanguageContext(task=task), Observation(state=state, images=images)))
    assert "put the red cube in the blue bin" in prompts[0] and "pink" not in prompts[0]
    assert out.plan == "1. pick up the pink cube\n2. place the pink cube in the left zone"
    assert out.subtask == "pick up the pink cube"  # the first step of the plan, in real names


def test_train_refuses_bad_slots_in_one_line(oracle: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from steerable.cli.main import main

    args = ["train", "--dataset", str(oracle.root), "--output_dir", str(tmp_path / "o"), "--batch_size", "4",
            "--steps", "1", "--no_progress", *TINY_FLAGS, "--policy.name_slots", "[[red cube]]"]
    assert main(args) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "name_slots" in lines[0] and "two or more" in lines[0]
    assert not (tmp_path / "o" / "checkpoints").exists()


def test_train_takes_explicit_groups_and_refuses_a_bare_word(oracle: Any, tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """The `synthetic` preset is gone (the simulator's meta/objects.json gives its objects' kinds): a
    word is one line and exit 2; the simulator's groups, written out, train."""
    import json

    from steerable.cli.main import main

    base = ["train", "--dataset", str(oracle.root), "--batch_size", "4", "--steps", "1", "--no_progress",
            "--eval_every", "1", "--eval_text_cases", "0", *TINY_FLAGS]
    assert main([*base, "--output_dir", str(tmp_path / "bad"), "--policy.name_slots", "synthetic"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "not a list of name groups" in lines[0] and "meta/objects.json" in lines[0]
    assert not (tmp_path / "bad" / "checkpoints").exists()
    assert main([*base, "--output_dir", str(tmp_path / "ok"), "--policy.name_slots", json.dumps(GROUPS)]) == 0
    config = json.loads(next((tmp_path / "ok" / "checkpoints").glob("step_*/config.json")).read_text())
    assert config["name_slots"] == GROUPS
