"""Name swapping (steerable.policy.augment): a sample's names swapped consistently, within their group,
only for the components whose answer the prompt's text decides, reproducibly; and `steerable train`'s flags."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from policy_helpers import TINY, TINY_FLAGS, build, one_thread  # noqa: F401  (autouse fixture)
from steerable.dataset import open_dataset
from steerable.errors import ConfigError
from steerable.policy.augment import TEXT_ONLY_COMPONENTS, NameSwap
from steerable.policy.data import PolicyDataset
from steerable.recipes import load_recipe
from steerable.synthetic import generate_synthetic
from steerable.synthetic.commands import CUBE_NAMES, DIRECTIONS, RECEPTACLE_NAMES

GROUPS = (CUBE_NAMES, RECEPTACLE_NAMES, tuple(DIRECTIONS))
NAMES = re.compile(r"\b(" + "|".join(sorted((n for g in GROUPS for n in g), key=len, reverse=True)) + r")\b")


def _names(text: str) -> list[str]:
    return NAMES.findall(text)


@pytest.fixture(scope="module")
def oracle(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Realistic episodes (pushes, zones, 1-4 steps) with oracle language and a redirect in each."""
    root = tmp_path_factory.mktemp("swap") / "ds"
    generate_synthetic(root, episodes=4, seed=5, difficulty="realistic", with_language=True, interjection_rate=1.0)
    return open_dataset(root)


def test_one_mapping_renames_prompt_answer_and_spoken_reply_alike() -> None:
    swap = NameSwap((CUBE_NAMES, RECEPTACLE_NAMES, tuple(DIRECTIONS)), rate=1.0)
    mapping = {**{n: n for g in GROUPS for n in g}, "red cube": "cyan cube", "cyan cube": "red cube",
               "left zone": "grey bin", "grey bin": "left zone", "left": "back", "back": "left"}
    messages = [
        {"role": "user", "content": "push the red cube left, then put the cyan cube in the left zone"},
        {"role": "assistant", "content": "1. push the red cube left\n2. pick up the cyan cube",
         "tool_calls": [{"type": "function", "function": {"name": "say", "arguments": {"text": "The red cube, left."}}}]},
    ]
    out = swap.messages(messages, mapping)
    assert out[0]["content"] == "push the cyan cube back, then put the red cube in the grey bin"
    assert out[1]["content"] == "1. push the cyan cube back\n2. pick up the red cube"
    call = out[1]["tool_calls"][0]
    assert call["function"]["name"] == "say" and call["type"] == "function"
    assert call["function"]["arguments"]["text"] == "The cyan cube, back."
    assert messages[0]["content"].startswith("push the red cube")  # the input is left as it was


def test_a_mapping_permutes_each_group_within_itself() -> None:
    swap = NameSwap(GROUPS)
    rng = np.random.default_rng(0)
    for _ in range(50):
        mapping = swap.mapping(rng)
        for group in GROUPS:
            assert sorted(mapping[n] for n in group) == sorted(group)


@pytest.mark.parametrize(
    ("groups", "rate", "message"),
    [
        ((("red cube",),), 0.5, "at least two"),
        ((("red cube", "red cube"),), 0.5, "at least two"),
        ((("red cube", "blue bin"), ("blue bin", "grey bin")), 0.5, "in two groups"),
        ((("red cube", " "),), 0.5, "empty"),
        ((("red cube", "pink cube"),), 1.5, "[0, 1]"),
    ],
)
def test_bad_groups_are_refused(groups: Any, rate: float, message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        NameSwap(groups, rate)


def test_the_default_components_are_cut_to_the_recipe_and_named_ones_must_exist() -> None:
    swap = NameSwap.from_settings([list(CUBE_NAMES)], 0.5, None, ["plan", "progress", "low_level_execution"])
    assert swap is not None and swap.components == {"plan"}
    assert NameSwap.from_settings([], 0.5, None, ["plan"]) is None
    with pytest.raises(ConfigError, match="no component nope"):
        NameSwap.from_settings([list(CUBE_NAMES)], 0.5, ["plan", "nope"], ["plan", "progress"])


def _dataset(ds: Any, swap: NameSwap | None, seed: int = 0) -> PolicyDataset:
    built = build(ds)
    return PolicyDataset(ds, load_recipe("hierarchical"), built.model.cfg, built.processor.image_size,
                         swap=swap, seed=seed, event_repeat=2)


def test_only_text_decided_components_are_swapped_and_always_consistently(oracle: Any) -> None:
    swapped = _dataset(oracle, NameSwap(GROUPS, rate=1.0))
    plain = _dataset(oracle, None)
    seen: dict[str, int] = {}
    changed = 0
    for i in range(0, len(swapped), 7):
        a, b = swapped[i], plain[i]
        if a is None:
            assert b is None
            continue
        texts_a = [json.dumps([m.get("content"), m.get("tool_calls")]) for m in a["messages"]]
        texts_b = [json.dumps([m.get("content"), m.get("tool_calls")]) for m in b["messages"]]
        component = (swapped.frames.rendered(swapped.positions[i])[1] if i < len(swapped.positions)
                     else swapped.extra[i - len(swapped.positions)][1])
        seen[component] = seen.get(component, 0) + 1
        if component not in TEXT_ONLY_COMPONENTS:
            assert texts_a == texts_b, component  # the scene decides these answers: never swapped
            continue
        # One mapping for the whole sample: the same name always becomes the same name.
        mapping: dict[str, str] = {}
        for ta, tb in zip(texts_a, texts_b, strict=True):
            assert NAMES.sub("_", ta) == NAMES.sub("_", tb)  # only names differ
            for old, new in zip(_names(tb), _names(ta), strict=True):
                assert mapping.setdefault(old, new) == new
                assert any(old in g and new in g for g in GROUPS)
        changed += any(k != v for k, v in mapping.items())
        assert a["actions"].shape == b["actions"].shape
    assert {"plan", "progress", "low_level_execution"} <= set(seen)
    assert changed > 10


def test_the_draws_follow_seed_epoch_and_item_so_a_resumed_run_repeats_them(oracle: Any) -> None:
    def plans(data: PolicyDataset, epoch: int) -> list[str]:
        data.epoch = epoch
        out = []
        for i in range(0, len(data.positions), 5):
            item = data[i]
            if item is not None and item["target_message_indices"]:
                out.append(item["messages"][item["target_message_indices"][-1]]["content"])
        return out

    swap = NameSwap(GROUPS, rate=0.5)
    first = plans(_dataset(oracle, swap), 0)
    assert plans(_dataset(oracle, swap), 0) == first
    assert plans(_dataset(oracle, swap), 1) != first
    assert plans(_dataset(oracle, swap, seed=1), 0) != first


def test_train_records_the_swap_and_refuses_bad_groups(oracle: Any, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    from steerable.cli.main import main

    base = ["train", "--dataset", str(oracle.root), "--batch_size", "4", "--steps", "2", "--eval_every", "100",
            "--no_progress", *TINY_FLAGS]
    groups = "[[red cube, green cube, orange cube, purple cube, pink cube, cyan cube], [blue bin, grey bin]]"
    assert main([*base, "--output_dir", str(tmp_path / "ok"), "--swap_names", groups, "--swap_rate", "0.25"]) == 0
    state = json.loads((tmp_path / "ok" / "checkpoints" / "step_00000002" / "trainer_state.json").read_text())
    assert state["swap"]["rate"] == 0.25 and state["swap"]["groups"][1] == ["blue bin", "grey bin"]
    assert set(state["swap"]["components"]) == set(TEXT_ONLY_COMPONENTS)
    capsys.readouterr()
    for extra, message in ((["--swap_names", "[[red cube]]"], "at least two"),
                           (["--swap_names", groups, "--swap_components", "plan,nope"], "no component nope"),
                           (["--swap_rate", "2"], "swap_rate")):
        assert main([*base, "--output_dir", str(tmp_path / "bad"), *extra]) == 2, extra
        lines = capsys.readouterr().err.strip().splitlines()
        assert len(lines) == 1 and message in lines[0], lines
    assert not (tmp_path / "bad" / "checkpoints").exists()  # refused before anything was written


def test_a_resumed_run_keeps_the_swap_it_started_with() -> None:
    from steerable.policy.settings import TrainConfig
    from steerable.policy.trainer import _name_swap

    recipe = load_recipe("hierarchical")
    cfg = TrainConfig(dataset=Path("."), output_dir=Path("."), swap_names=[["pink cube", "red cube"]])
    kept = {"swap": {"groups": [list(CUBE_NAMES)], "rate": 0.3, "components": ["plan"]}}
    swap = _name_swap(cfg, recipe, kept)
    assert swap is not None and swap.groups == (CUBE_NAMES,) and swap.rate == 0.3 and swap.components == {"plan"}
    assert _name_swap(cfg, recipe, {"swap": None}) is None
    fresh = _name_swap(cfg, recipe, {})
    assert fresh is not None and fresh.groups == (("pink cube", "red cube"),)


def test_the_flags_are_documented() -> None:
    text = (Path(__file__).resolve().parents[1] / "docs" / "train.md").read_text(encoding="utf-8")
    assert "--swap_names" in text and "Name swapping" in text
