"""`steerable train --text_noise P` (steerable.policy.text_noise): in training, the words of a person's
messages that the sample's target does not repeat are replaced, dropped or preceded by made-up words;
the target, the recipe's own prompts, the low level's command and the held-out items stay as they are."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from policy_helpers import TINY_FLAGS, build, one_thread  # noqa: F401  (autouse fixture)
from steerable.dataset import open_dataset
from steerable.policy.data import PolicyDataset
from steerable.policy.text_noise import noisy_messages, word_key
from steerable.recipes import load_recipe
from steerable.synthetic import generate_synthetic

PLAN = "1. pick up the red cube\n2. place the red cube in the blue bin"
TASK = "put the red cube in the blue bin, then wait"


def _messages(task: str = TASK) -> list[dict[str, Any]]:
    return [{"role": "user", "content": task}, {"role": "user", "content": "Write the plan."},
            {"role": "assistant", "content": PLAN}]


def test_only_words_the_target_does_not_repeat_change() -> None:
    out = noisy_messages(_messages(), [2], {TASK}, 0.99, np.random.default_rng(0))
    assert out[1:] == _messages()[1:]  # the recipe's own prompt and the target are untouched
    kept = {word_key(w) for w in PLAN.split()}
    words = out[0]["content"].split()
    # Every word of the task the plan repeats is still there, in order; "put", "then" and "wait" are
    # replaced, dropped or preceded by made-up words.
    assert [w for w in words if word_key(w) in kept] == [w for w in TASK.split() if word_key(w) in kept]
    added = [word_key(w) for w in words if word_key(w) not in kept | {"put", "then", "wait"}]
    assert words != TASK.split() and added and all(w.isalpha() and w.islower() for w in added)


def test_capitalised_words_are_replaced_with_their_punctuation() -> None:
    said = "Wait, put it in the blue bin."
    outs = [noisy_messages([{"role": "user", "content": said}, {"role": "assistant", "content": PLAN}], [1], {said},
                           0.99, np.random.default_rng(s))[0]["content"] for s in range(20)]
    assert all(o.endswith("in the blue bin.") for o in outs)  # the words the plan repeats, as they were
    # "Wait," replaced by a made-up word that keeps its comma (kvlc, ...), not only dropped or preceded.
    assert any(re.match(r"^[a-z]{2,8}, ", o) and not o.lower().startswith("wait") for o in outs)


def test_the_noise_is_drawn_per_item_and_reproducible() -> None:
    draws = {noisy_messages(_messages(), [2], {TASK}, 0.5, np.random.default_rng(s))[0]["content"] for s in range(40)}
    assert TASK in draws and len(draws) > 10  # some items keep the task, most differ from each other
    again = noisy_messages(_messages(), [2], {TASK}, 0.5, np.random.default_rng(3))
    assert again == noisy_messages(_messages(), [2], {TASK}, 0.5, np.random.default_rng(3))


@pytest.mark.parametrize(("targets", "p", "said"), [([], 0.9, {TASK}), ([2], 0.0, {TASK}), ([2], 0.9, set())])
def test_no_target_no_noise_or_no_person_leaves_the_sample(targets: list[int], p: float, said: set[str]) -> None:
    assert noisy_messages(_messages(), targets, said, p, np.random.default_rng(0)) == _messages()


@pytest.fixture(scope="module")
def corrected(tmp_path_factory: pytest.TempPathFactory) -> Any:
    root = tmp_path_factory.mktemp("noise") / "ds"
    generate_synthetic(root, episodes=2, seed=3, difficulty="easy", with_language=True, interjection_rate=1.0)
    return open_dataset(root)


def test_training_items_get_the_noise_and_held_out_items_do_not(corrected: Any) -> None:
    built = build(corrected)
    recipe = load_recipe("hierarchical")
    clean = PolicyDataset(corrected, recipe, built.model.cfg, built.processor.image_size, event_repeat=1)
    noisy = PolicyDataset(corrected, recipe, built.model.cfg, built.processor.image_size, event_repeat=1,
                          text_noise=0.5)
    said_changed = interjection_changed = 0
    for i in range(len(clean)):
        a, b = clean[i], noisy[i]
        if a is None or b is None:
            assert a is None and b is None
            continue
        assert [m["role"] for m in a["messages"]] == [m["role"] for m in b["messages"]]
        said = {a["task"], *clean.frames.user_texts(a["episode_index"])}
        for m, n in zip(a["messages"], b["messages"], strict=True):
            if m["content"] == n["content"]:
                continue
            # Only a person's words change, only in a sample with a text target, never the target itself.
            assert m["role"] == "user" and m["content"] in said and a["target_message_indices"]
            said_changed += 1
            interjection_changed += m["content"] != a["task"]
        assert [a["messages"][k] for k in a["target_message_indices"]] == \
            [b["messages"][k] for k in b["target_message_indices"]]
        assert bool(a["action_mask"].any()) == bool(b["action_mask"].any())
    assert said_changed > 50 and interjection_changed > 0  # the task and the corrections both get noise


def test_user_texts_are_the_episode_user_rows(corrected: Any) -> None:
    data = PolicyDataset(corrected, load_recipe("hierarchical"), build(corrected).model.cfg, 16)
    texts = data.frames.user_texts(0)
    assert texts and all(isinstance(t, str) and t for t in texts)  # the episode's interjections
    assert not {"Write the plan.", "Which step now?"} & texts


def test_a_bad_noise_level_is_a_usage_error(tmp_path: Path) -> None:
    run = subprocess.run([sys.executable, "-m", "steerable", "train", "--dataset", str(tmp_path), "--output_dir",
                          str(tmp_path / "out"), "--text_noise", "1.5"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 2 and "text_noise" in run.stderr
    assert not (tmp_path / "out").exists()


def test_a_run_records_its_noise_and_a_resumed_run_keeps_it(corrected: Any, tmp_path: Path) -> None:
    out = tmp_path / "run"
    base = [sys.executable, "-m", "steerable", "train", "--dataset", str(corrected.root), "--output_dir", str(out),
            "--batch_size", "4", "--save_every", "1", "--no_progress", *TINY_FLAGS]
    subprocess.run([*base, "--steps", "1", "--text_noise", "0.3"], check=True, capture_output=True, timeout=240)
    subprocess.run([*base, "--steps", "2"], check=True, capture_output=True, timeout=240)  # resumed, no flag
    states = sorted(out.glob("checkpoints/*/trainer_state.json")) or sorted(out.glob("**/trainer_state.json"))
    assert len(states) >= 2
    assert [json.loads(s.read_text())["text_noise"] for s in states] == [0.3] * len(states)
