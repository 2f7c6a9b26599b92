"""steerable.train: the PyTorch dataset, collate, and the chat tokenizer's labels and truncation."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch
import transformers  # noqa: F401  (the chat tokenizer tests need it: a broken install must fail them)
from torch.utils.data import DataLoader

from steerable.dataset import LeRobotDataset
from steerable.errors import ConfigError, MissingExtraError
from steerable.recipes import Recipe, load_recipe
from steerable.train import IGNORE_INDEX, ChatTokenizer, RecipeDataset, collate
from train_data import (
    TEXT_ONLY_TEMPLATE,
    TOP,
    WRIST,
    Annotated,
    annotate_synthetic,
    open_annotated,
    tiny_tokenizer,
)

REPO = Path(__file__).resolve().parents[1]

VQA_ONLY = Recipe.from_dict({"blend": {
    name: {"weight": 1, "route": "vqa", "bindings": {
        "q": f"emitted_at(t, style=vqa, role=user, camera={cam})",
        "a": f"emitted_at(t, style=vqa, role=assistant, camera={cam})"},
        "messages": [
            {"role": "user", "stream": "high_level", "if_present": "q",
             "content": [{"type": "image", "feature": cam}, {"type": "text", "text": "${q}"}]},
            {"role": "assistant", "content": "${a}", "stream": "high_level", "target": True, "if_present": "a"}]}
    for name, cam in (("top", TOP), ("wrist", WRIST))}})

SAY_REPLY = '<tool_call>{"name": "say", "arguments": {"text": "Sure, I will place it gently."}}</tool_call>'


@pytest.fixture(scope="module")
def annotated(tmp_path_factory: pytest.TempPathFactory) -> Annotated:
    return annotate_synthetic(tmp_path_factory.mktemp("train") / "d")


@pytest.fixture(scope="module")
def ds(annotated: Annotated) -> LeRobotDataset:
    return open_annotated(annotated)


@pytest.fixture(scope="module")
def tok() -> Any:
    return tiny_tokenizer()


def position(ds: LeRobotDataset, episode: int, frame: int) -> int:
    return sum(e.length for e in ds.episodes if e.episode_index < episode) + frame


def label_text(tok: Any, labels: list[int]) -> str:
    return str(tok.decode([t for t in labels if t != IGNORE_INDEX]))


def video_frame(ds: LeRobotDataset, episode: int, camera: str, frame: int) -> np.ndarray:
    """The frame decoded straight from the mp4 with PyAV, by frame count (independent of steerable's decoder)."""
    import av

    ep = ds.episode(episode)
    wanted = round(ep.videos[camera].from_timestamp * ds.fps) + frame
    with av.open(str(ds.video_path(camera, ep))) as container:
        for i, decoded in enumerate(container.decode(video=0)):
            if i == wanted:
                return decoded.to_ndarray(format="rgb24")
    raise AssertionError(f"frame {wanted} is not in the video")


# --- RecipeDataset ------------------------------------------------------------------------------------


def test_items_carry_the_sample_the_frames_its_image_blocks_name_and_state_action(
    ds: LeRobotDataset, annotated: Annotated
) -> None:
    data = RecipeDataset(ds, VQA_ONLY, fallback="none")
    assert len(data) == sum(e.length for e in ds.episodes)
    frame = annotated.vqa_frames[1][WRIST]
    item = data[position(ds, 1, frame)]
    assert item is not None
    assert (item["episode_index"], item["frame_index"]) == (1, frame)
    assert item["messages"][0]["content"][0] == {"type": "image", "feature": WRIST}
    assert item["messages"][1] == {"role": "assistant", "content": '{"closed": true}'}
    assert item["target_message_indices"] == [1] and item["message_streams"] == ["high_level", "high_level"]
    assert list(item["images"]) == [WRIST]
    image = item["images"][WRIST]
    assert image.dtype == torch.uint8 and tuple(image.shape) == tuple(ds.features[WRIST]["shape"])
    assert np.array_equal(image.numpy(), video_frame(ds, 1, WRIST, frame))
    assert not np.array_equal(image.numpy(), video_frame(ds, 1, WRIST, frame - 5))
    table = pq.read_table(ds.data_path(ds.episode(1)))
    row = table.filter(
        (table.column("episode_index").to_numpy() == 1) & (table.column("frame_index").to_numpy() == frame)
    ).to_pylist()[0]
    assert item["index"] == row["index"] and item["timestamp"] == pytest.approx(row["timestamp"])
    for name in ("observation.state", "action"):
        assert item["features"][name].dtype == torch.float32
        assert item["features"][name].tolist() == pytest.approx(row[name])


def test_frames_without_a_sample_are_none_or_the_task_fallback(ds: LeRobotDataset, annotated: Annotated) -> None:
    plain = position(ds, 0, annotated.vqa_frames[0][TOP] + 1)
    assert RecipeDataset(ds, VQA_ONLY, fallback="none")[plain] is None
    item = RecipeDataset(ds, VQA_ONLY, fallback="task")[plain]
    assert item is not None
    assert item["messages"] == [{"role": "user", "content": ds.tasks[0]}]
    assert item["message_streams"] == ["low_level"] and item["target_message_indices"] == []
    assert item["images"] == {}


def test_positions_map_onto_episodes_in_order(ds: LeRobotDataset) -> None:
    data = RecipeDataset(ds, load_recipe("subtask"), features=None, decode_images=False)
    first_of_ep1 = ds.episode(0).length
    for i, expected in ((0, (0, 0)), (first_of_ep1 - 1, (0, first_of_ep1 - 1)), (first_of_ep1, (1, 0)),
                        (len(data) - 1, (2, ds.episode(2).length - 1))):
        item = data[i]
        assert item is not None and (item["episode_index"], item["frame_index"]) == expected and item["index"] == i
        assert "images" not in item and "features" not in item
    assert data[-1] == data[len(data) - 1]
    with pytest.raises(IndexError):
        data[len(data)]


def test_unknown_feature_names_are_a_clear_error(ds: LeRobotDataset) -> None:
    with pytest.raises(ConfigError, match=r"no numeric feature 'state'.*observation\.state"):
        RecipeDataset(ds, load_recipe("subtask"), features=("state",))
    with pytest.raises(ConfigError, match="observation.images.front"):
        RecipeDataset(ds, load_recipe("hirobot", camera_map={"top": "observation.images.front"}))


def test_dataset_survives_pickling_for_spawned_workers(ds: LeRobotDataset, annotated: Annotated) -> None:
    data = RecipeDataset(ds, VQA_ONLY)
    i = position(ds, 2, annotated.vqa_frames[2][TOP])
    before = data[i]
    copy = pickle.loads(pickle.dumps(data))  # what DataLoader's spawn/forkserver start methods do
    after = copy[i]
    assert before is not None and after is not None
    assert after["messages"] == before["messages"]
    assert torch.equal(after["images"][TOP], before["images"][TOP])


# --- collate ------------------------------------------------------------------------------------------


def test_dataloader_with_workers_batches_and_drops_none(ds: LeRobotDataset) -> None:
    data = RecipeDataset(ds, VQA_ONLY, fallback="none")
    # timeout: a worker that never delivers a batch fails the test (RuntimeError) instead of hanging it.
    loader = DataLoader(data, batch_size=64, num_workers=2, collate_fn=collate, timeout=60)
    batches = [b for b in loader if b is not None]
    assert sum(len(b["messages"]) for b in batches) == 6  # one VQA pair per camera per episode
    for b in batches:
        n = len(b["messages"])
        assert b["index"].shape == (n,) and b["features"]["observation.state"].shape == (n, 4)
        assert all(isinstance(m, list) and m[0]["role"] == "user" for m in b["messages"])
        for camera, frames in b["images"].items():
            assert len(frames) == n
            named = [camera in [blk["feature"] for blk in m[0]["content"] if blk["type"] == "image"]
                     for m in b["messages"]]
            assert [f is not None for f in frames] == named


def test_collate_stacks_a_camera_every_sample_has_and_rejects_mixed_keys(
    ds: LeRobotDataset, annotated: Annotated
) -> None:
    data = RecipeDataset(ds, VQA_ONLY)
    a, b = (data[position(ds, e, annotated.vqa_frames[e][TOP])] for e in (0, 1))
    batch = collate([None, a, None, b])
    assert batch is not None
    assert batch["images"][TOP].shape == (2, 160, 224, 3)
    assert batch["index"].tolist() == [a["index"], b["index"]]
    assert batch["message_streams"] == [a["message_streams"], b["message_streams"]]
    assert collate([None, None]) is None
    assert a is not None
    with pytest.raises(ValueError, match=r"Inconsistent batch: 1/2 samples carry 'index'"):
        collate([a, {k: v for k, v in a.items() if k != "index"}])
    with pytest.raises(ValueError, match=r"Inconsistent batch: 1/2 samples carry features\.'action'"):
        collate([a, {**a, "features": {k: v for k, v in a["features"].items() if k != "action"}}])


# --- ChatTokenizer --------------------------------------------------------------------------------------


def encode(ct: ChatTokenizer, item: dict[str, Any]) -> Any:
    return ct.encode(item["messages"], item["message_streams"], item["target_message_indices"])


def test_labels_cover_exactly_the_target_turns(ds: LeRobotDataset, annotated: Annotated, tok: Any) -> None:
    data = RecipeDataset(ds, load_recipe("hirobot"), decode_images=False)
    ct = ChatTokenizer(tok, tools=ds.tools, return_tensors=None)
    item = data[position(ds, 0, annotated.interjection_frames[0])]
    assert item is not None and item["message_streams"][-1] == "high_level"
    out = encode(ct, item)
    assert label_text(tok, out.labels) == "1. grasp\n2. place gently" + SAY_REPLY + "<|im_end|>\n"
    kept = [i for i, t in enumerate(out.labels) if t != IGNORE_INDEX]
    assert kept == list(range(kept[0], kept[-1] + 1)) and kept[-1] == len(out.input_ids) - 1
    assert all(out.labels[i] == out.input_ids[i] for i in kept)
    assert out.predict_actions is False and out.truncated_target is False
    # several targets, and an assistant turn that is context only
    messages = [{"role": "user", "content": "T"}, {"role": "assistant", "content": "context reply"},
                {"role": "user", "content": "q1"}, {"role": "assistant", "content": "first answer"},
                {"role": "user", "content": "q2"}, {"role": "assistant", "content": "second answer"}]
    two = ct.encode(messages, ["high_level"] * 6, [3, 5])
    assert label_text(tok, two.labels) == "first answer<|im_end|>\nsecond answer<|im_end|>\n"


def test_tools_from_info_json_reach_the_template(ds: LeRobotDataset, tok: Any) -> None:
    messages = [{"role": "user", "content": "T"}, {"role": "assistant", "content": "A"}]
    with_tools = ChatTokenizer(tok, tools=ds.tools, return_tensors=None).encode(messages, ["high_level"] * 2, [1])
    text = tok.decode(with_tools.input_ids)
    assert text.startswith("<|im_start|>system\nTools: ") and '"name": "say"' in text
    assert json.loads(text.split("Tools: ", 1)[1].split("<|im_end|>")[0]) == ds.tools
    assert label_text(tok, with_tools.labels) == "A<|im_end|>\n"
    bare = ChatTokenizer(tok, return_tensors=None).encode(messages, ["high_level"] * 2, [1])
    assert "Tools:" not in tok.decode(bare.input_ids)


def test_predict_actions_follows_any_low_level_message(tok: Any) -> None:
    ct = ChatTokenizer(tok, return_tensors=None)
    user, reply = {"role": "user", "content": "reach"}, {"role": "assistant", "content": "ok"}
    assert ct.encode([user], ["low_level"], []).predict_actions  # no target: the reference said False
    assert ct.encode([user, reply], ["low_level", "high_level"], [1]).predict_actions
    assert not ct.encode([user, reply], ["high_level", "high_level"], [1]).predict_actions
    assert all(t == IGNORE_INDEX for t in ct.encode([user], ["low_level"], []).labels)


def long_chat() -> tuple[list[dict[str, Any]], list[str], list[int]]:
    filler = " ".join(["the robot moves the cube to the left"] * 6)
    messages = [{"role": "user", "content": "place the cube"}]
    messages += [{"role": "user", "content": f"note {i}: {filler}"} for i in range(4)]
    messages += [{"role": "assistant", "content": "grasp the cube"}]
    return messages, ["high_level"] * 6, [5]


def test_left_context_truncation_drops_context_and_keeps_the_target(tok: Any) -> None:
    messages, streams, targets = long_chat()
    full = ChatTokenizer(tok, return_tensors=None).encode(messages, streams, targets)
    limit = len(full.input_ids) // 2
    ct = ChatTokenizer(tok, max_length=limit, return_tensors=None)
    out = ct.encode(messages, streams, targets)
    assert len(out.input_ids) <= limit
    assert label_text(tok, out.labels) == "grasp the cube<|im_end|>\n"
    assert out.truncated_target is False and out.dropped_messages >= 2
    text = tok.decode(out.input_ids)
    assert text.startswith("<|im_start|>user\nplace the cube<|im_end|>")  # the first user turn stays
    assert "note 3" in text and "note 0" not in text  # the oldest context goes first
    assert ct.truncated_targets == 0 and ct.dropped_messages == out.dropped_messages


def test_right_truncation_flags_and_counts_cut_targets(tok: Any) -> None:
    messages, streams, targets = long_chat()
    full = ChatTokenizer(tok, return_tensors=None).encode(messages, streams, targets)
    ct = ChatTokenizer(tok, max_length=len(full.input_ids) - 3, truncation="right", return_tensors=None)
    out = ct.encode(messages, streams, targets)
    assert out.input_ids == full.input_ids[: len(full.input_ids) - 3] and out.truncated_target
    assert ct.truncated_targets == 1
    # a target longer than max_length cannot survive either way: flagged, never silent
    tight = ChatTokenizer(tok, max_length=4, return_tensors=None)
    assert tight.encode(messages, streams, targets).truncated_target and tight.truncated_targets == 1


def test_image_blocks_become_placeholders_only_where_the_template_renders_them(
    ds: LeRobotDataset, annotated: Annotated, tok: Any
) -> None:
    item = RecipeDataset(ds, VQA_ONLY, decode_images=False)[position(ds, 0, annotated.vqa_frames[0][TOP])]
    assert item is not None
    multimodal = ChatTokenizer(tok, return_tensors=None)
    assert multimodal.images
    out = encode(multimodal, item)
    assert "<|image|>how many cubes are visible?" in tok.decode(out.input_ids) and out.image_keys == [TOP]
    text_only = ChatTokenizer(tiny_tokenizer(TEXT_ONLY_TEMPLATE), return_tensors=None)
    assert not text_only.images and not text_only.blocks
    plain = encode(text_only, item)
    assert tok.decode(plain.input_ids) == '### user: how many cubes are visible?\n### assistant: {"count": 1}\n'
    assert plain.image_keys == []


def test_templates_that_render_the_last_turn_differently_still_label_the_target(tok: Any) -> None:
    template = ("{% for m in messages %}{{ m.role }}: {% if loop.last %}>> {% endif %}{{ m.content }}"
                "{{ '\\n' }}{% endfor %}")
    ct = ChatTokenizer(tiny_tokenizer(template), return_tensors=None)
    messages = [{"role": "user", "content": "say grasp the cube"}, {"role": "assistant", "content": "grasp the cube"}]
    out = ct.encode(messages, ["high_level"] * 2, [1])
    # the span is located in the text; the token that starts it carries the space before it
    assert label_text(tok, out.labels) == " grasp the cube" and ct.unlocated_targets == 0


def test_flatten_say_writes_speech_as_a_text_marker(ds: LeRobotDataset, annotated: Annotated, tok: Any) -> None:
    item = RecipeDataset(ds, load_recipe("hirobot"), decode_images=False)[
        position(ds, 0, annotated.interjection_frames[0])]
    assert item is not None
    out = encode(ChatTokenizer(tok, flatten_say=True, return_tensors=None), item)
    assert label_text(tok, out.labels) == ("1. grasp\n2. place gently<say>Sure, I will place it gently.</say>"
                                           "<|im_end|>\n")


def test_batches_from_the_dataloader_tokenize_and_pad(ds: LeRobotDataset, tok: Any) -> None:
    data = RecipeDataset(ds, load_recipe("subtask_mem_vqa_speech"))
    ct = ChatTokenizer(tok, tools=ds.tools)
    batch = ct(collate([data[i] for i in range(40, 56)]))
    assert batch is not None
    ids, mask, labels = batch["input_ids"], batch["attention_mask"], batch["labels"]
    assert ids.dtype == torch.long and ids.shape == mask.shape == labels.shape and ids.shape[0] == 16
    assert "messages" not in batch and batch["features"]["observation.state"].shape == (16, 4)
    lengths = mask.sum(1)
    for row in range(16):
        n = int(lengths[row])
        assert mask[row, :n].all() and not mask[row, n:].any()  # right padding
        assert (labels[row, n:] == IGNORE_INDEX).all()
    assert batch["predict_actions"].dtype == torch.bool
    assert ct(None) is None
    tok.padding_side = "left"
    try:
        left = ChatTokenizer(tok)(collate([data[40], data[45]]))
    finally:
        tok.padding_side = "right"
    assert left is not None and left["attention_mask"][:, -1].all()


def test_unusable_tokenizers_are_clear_errors(tok: Any) -> None:
    from transformers import PreTrainedTokenizerFast

    no_template = PreTrainedTokenizerFast(tokenizer_object=tok.backend_tokenizer)
    with pytest.raises(ConfigError, match="chat template"):
        ChatTokenizer(no_template)
    strict = tiny_tokenizer("{% for m in messages %}{% if m.role == 'system' %}{{ raise_exception('no system') }}"
                            "{% endif %}{{ m.content }}{% endfor %}")
    with pytest.raises(ConfigError, match="cannot render this sample: no system"):
        ChatTokenizer(strict).encode([{"role": "system", "content": "x"}], ["low_level"], [])
    with pytest.raises(ConfigError, match="max_length"):
        ChatTokenizer(tok, max_length=0)


# --- the optional dependency ------------------------------------------------------------------------


def test_importing_steerable_train_needs_no_torch() -> None:
    code = (
        "import sys; import steerable.train as t; assert 'torch' not in sys.modules; "
        "t.ChatTokenizer; t.export_samples; assert 'torch' not in sys.modules; "
        "sys.modules['torch'] = None\n"
        "try:\n    t.RecipeDataset\nexcept Exception as e:\n    print(type(e).__name__, e)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(MissingExtraError.__name__) and "steerable[train]" in out.stdout
