"""`steerable export` and export_samples: OpenAI-chat JSONL with JPEG frames, HF datasets, the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from steerable.dataset import LeRobotDataset
from steerable.errors import ConfigError
from steerable.recipes import load_recipe
from steerable.train import IGNORE_INDEX, ChatTokenizer, DatasetRenderer, export_samples
from train_data import TOP, WRIST, Annotated, annotate_synthetic, open_annotated, tiny_tokenizer

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def annotated(tmp_path_factory: pytest.TempPathFactory) -> Annotated:
    return annotate_synthetic(tmp_path_factory.mktemp("export") / "d")


@pytest.fixture(scope="module")
def ds(annotated: Annotated) -> LeRobotDataset:
    return open_annotated(annotated)


def read_jsonl(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "samples.jsonl").read_text(encoding="utf-8").splitlines()]


def steerable(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "steerable.cli.main", *args], capture_output=True, text=True,
                          cwd=REPO, timeout=300)


def test_jsonl_lines_are_openai_chat_samples_with_jpeg_frames(
    ds: LeRobotDataset, annotated: Annotated, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    report = export_samples(ds, load_recipe("hirobot"), out)
    records = read_jsonl(out)
    assert len(records) == report.samples
    assert report.samples + report.skipped + report.untargeted == ds.total_frames
    assert report.skipped > 0  # frames whose drawn component has nothing there (fallback none)
    assert all(record["metadata"]["target_message_indices"] for record in records)
    referenced: set[str] = set()
    for record in records:
        meta = record["metadata"]
        assert set(meta) == {"index", "episode_index", "frame_index", "component", "target_message_indices",
                             "message_streams"}
        assert len(meta["message_streams"]) == len(record["messages"])
        for i, message in enumerate(record["messages"]):
            if message["role"] == "assistant":
                assert message["weight"] == int(i in meta["target_message_indices"])
            for part in message.get("content") if isinstance(message.get("content"), list) else ():
                if part["type"] == "image_url":
                    referenced.add(part["image_url"]["url"])
        assert ("tools" in record) == any("tool_calls" in m for m in record["messages"])
    assert any("tools" in record for record in records)  # hirobot's interjection reply calls `say`
    # one VQA frame per camera per episode, each referenced by relative path and written once
    files = {f"images/{p.name}" for p in (out / "images").iterdir()}
    assert referenced == files and report.images == len(files) == 6
    name = f"images/ep000001_f{annotated.vqa_frames[1][TOP]:06d}_top.jpg"
    assert name in files and not Path(name).is_absolute()
    # the JPEG is a faithful copy of that frame, and of no other frame of the episode
    jpeg = np.asarray(Image.open(out / name).convert("RGB"), dtype=np.int16)
    frames = ds.decode_frames(1, TOP, [float(t) for t in ds.episode_timestamps(1)])
    errors = [float(np.abs(jpeg - f.astype(np.int16)).mean()) for f in frames]
    assert int(np.argmin(errors)) == annotated.vqa_frames[1][TOP] and min(errors) < 3


def test_tool_calls_follow_the_openai_format(ds: LeRobotDataset, annotated: Annotated, tmp_path: Path) -> None:
    # a recipe that answers every interjection with a `say` call
    recipe = load_recipe("subtask_mem_vqa_speech")
    reply = recipe.from_dict({"messages": [
        {"role": "user", "content": "${task}", "stream": "high_level"},
        {"role": "user", "content": "${interjection}", "stream": "high_level", "if_present": "interjection"},
        {"role": "assistant", "stream": "high_level", "target": True, "tool_calls_from": "speech",
         "if_present": "speech"}]})
    report = export_samples(ds, reply, tmp_path / "out")
    records = read_jsonl(tmp_path / "out")
    assert report.samples == len(records) == 3 and report.images == 0
    for record in records:
        assert record["metadata"]["frame_index"] == annotated.interjection_frames[record["metadata"]["episode_index"]]
        assert record["tools"] == ds.tools
        message = record["messages"][-1]
        assert "content" not in message and message["weight"] == 1
        (call,) = message["tool_calls"]
        assert call["type"] == "function" and call["id"].startswith("call_")
        assert call["function"]["name"] == "say"
        assert isinstance(call["function"]["arguments"], str)
        assert json.loads(call["function"]["arguments"]) == {"text": "Sure, I will place it gently."}


def test_max_samples_episodes_and_fallback(ds: LeRobotDataset, tmp_path: Path) -> None:
    recipe = load_recipe("hirobot")
    some = export_samples(ds, recipe, tmp_path / "a", episodes=[2, 0], max_samples=200, keep_untargeted=True)
    episodes = [r["metadata"]["episode_index"] for r in read_jsonl(tmp_path / "a")]
    assert some.samples == len(episodes) == 200 and episodes == sorted(episodes, key=[2, 0].index)
    assert set(episodes) == {0, 2}
    every = export_samples(ds, recipe, tmp_path / "b", fallback="task")
    assert every.samples == ds.total_frames and every.skipped == 0
    fallbacks = [r for r in read_jsonl(tmp_path / "b") if r["metadata"]["component"] == "fallback:task"]
    assert fallbacks and all(r["metadata"]["message_streams"] == ["low_level"] for r in fallbacks)
    with pytest.raises(ConfigError, match="needs a recipe"):
        export_samples(ds, None, tmp_path / "c")
    renderer = DatasetRenderer(ds, recipe)
    assert export_samples(renderer, None, tmp_path / "d", max_samples=5).samples == 5


def test_samples_without_a_text_target_are_left_out_and_counted_unless_kept(ds: LeRobotDataset,
                                                                           tmp_path: Path) -> None:
    """`subtask` draws low_level_execution on most frames: a lone low-level user turn, nothing for a
    VLM to learn. A text export leaves those out and counts them; --keep_untargeted keeps them."""
    recipe = load_recipe("subtask")
    default = export_samples(ds, recipe, tmp_path / "a")
    records = read_jsonl(tmp_path / "a")
    assert records and all(r["metadata"]["target_message_indices"] for r in records)
    assert default.untargeted > default.samples > 0
    assert default.samples + default.skipped + default.untargeted == ds.total_frames
    kept = export_samples(ds, recipe, tmp_path / "b", keep_untargeted=True)
    assert kept.samples == default.samples + default.untargeted and kept.untargeted == 0
    bare = [r for r in read_jsonl(tmp_path / "b") if not r["metadata"]["target_message_indices"]]
    assert len(bare) == default.untargeted
    assert all(r["metadata"]["message_streams"] == ["low_level"] for r in bare)
    # The task fallback exists to add such samples: asking for it keeps them, unless told otherwise.
    assert export_samples(ds, recipe, tmp_path / "c", fallback="task").samples == ds.total_frames
    targeted = export_samples(ds, recipe, tmp_path / "d", fallback="task", keep_untargeted=False)
    assert targeted.samples == default.samples and targeted.untargeted == ds.total_frames - default.samples

    cli = steerable("export", str(ds.root), "--recipe", "subtask", "--out", str(tmp_path / "e"))
    assert cli.returncode == 0, cli.stderr
    assert f"exported {default.samples} samples" in cli.stdout
    assert f"{default.untargeted} samples without a text target skipped" in cli.stdout
    cli = steerable("export", str(ds.root), "--recipe", "subtask", "--out", str(tmp_path / "f"), "--keep_untargeted")
    assert cli.returncode == 0 and f"exported {kept.samples} samples" in cli.stdout, cli.stderr
    actions = tmp_path / "actions.yaml"  # only a low-level turn: nothing with a text target at all
    actions.write_text("messages:\n  - {role: user, content: '${subtask}', stream: low_level, if_present: subtask}\n")
    none = steerable("export", str(ds.root), "--recipe", str(actions), "--out", str(tmp_path / "g"))
    assert none.returncode == 1 and none.stderr.count("\n") == 1, none.stderr
    assert "has a text target" in none.stderr and "--keep_untargeted" in none.stderr


def test_hf_export_loads_with_datasets(ds: LeRobotDataset, annotated: Annotated, tmp_path: Path) -> None:
    import datasets  # --format hf needs the datasets package
    report = export_samples(ds, load_recipe("hirobot"), tmp_path / "hf", format="hf")
    loaded = datasets.load_from_disk(str(tmp_path / "hf"))
    assert len(loaded) == report.samples and report.images == 6
    with_images = [row for row in loaded if row["images"]]
    assert len(with_images) == 6
    for row in with_images:
        (image,) = row["images"]
        assert row["messages"][0]["content"][0] == {"type": "image", "text": None}
        camera = TOP if "cubes" in row["messages"][0]["content"][1]["text"] else WRIST
        assert row["frame_index"] == annotated.vqa_frames[row["episode_index"]][camera]
        height, width, _ = ds.features[camera]["shape"]
        assert image.size == (width, height)
    spoken = [row for row in loaded if any(m["tool_calls"] for m in row["messages"])]
    assert spoken and all(row["tools"] is None for row in loaded if row not in spoken)
    for row in spoken:
        call = row["messages"][-1]["tool_calls"][0]
        assert json.loads(call["function"]["arguments"]) == {"text": "Sure, I will place it gently."}
        assert json.loads(row["tools"]) == ds.tools


def test_out_must_be_empty_unless_overwrite_and_failures_leave_nothing(ds: LeRobotDataset, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    recipe = load_recipe("subtask")
    with pytest.raises(ConfigError, match="not empty.*--overwrite"):
        export_samples(ds, recipe, out)
    assert (out / "keep.txt").read_text() == "mine"

    def boom(_: int) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        export_samples(ds, recipe, out, overwrite=True, progress=boom)
    assert sorted(os.listdir(tmp_path)) == ["out"] and (out / "keep.txt").exists()  # no temp folder left
    export_samples(ds, recipe, out, overwrite=True, max_samples=3)
    assert sorted(os.listdir(out)) == ["images", "samples.jsonl"] and sorted(os.listdir(tmp_path)) == ["out"]


def test_render_export_tokenize_end_to_end(ds: LeRobotDataset, tmp_path: Path) -> None:
    """Exported JSONL lines tokenize to exactly what the training dataset path gives for the same frame."""
    from steerable.train import RecipeDataset

    recipe = load_recipe("subtask_mem_vqa_speech")
    export_samples(ds, recipe, tmp_path / "out")
    tok = tiny_tokenizer()
    ct = ChatTokenizer(tok, tools=ds.tools, return_tensors=None)
    data = RecipeDataset(ds, recipe, fallback="none", decode_images=False)
    records = read_jsonl(tmp_path / "out")
    checked = 0
    for record in records[::3] + [r for r in records if "tools" in r or r["metadata"]["component"].startswith("ask")]:
        meta = record["metadata"]
        exported = ct.encode(record["messages"], meta["message_streams"], meta["target_message_indices"])
        item = data[meta["index"]]
        assert item is not None
        direct = ct.encode(item["messages"], item["message_streams"], item["target_message_indices"])
        assert exported.input_ids == direct.input_ids and exported.labels == direct.labels
        targets = [record["messages"][i] for i in meta["target_message_indices"]]
        if targets and isinstance(targets[-1].get("content"), str):
            text = tok.decode([t for t in exported.labels if t != IGNORE_INDEX])
            assert text.startswith(targets[0]["content"]) and text.endswith("<|im_end|>\n")
        checked += 1
    assert checked > 40


def test_cli_exports_and_reports_bad_input_in_one_line(ds: LeRobotDataset, tmp_path: Path) -> None:
    root = str(ds.root)
    ok = steerable("export", root, "--recipe", "hirobot", "--out", str(tmp_path / "o"), "--episodes", "0,2",
                   "--max_samples", "30", "--compat", "lerobot")
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.strip().startswith("exported 30 samples") and str(tmp_path / "o") in ok.stdout
    assert len(read_jsonl(tmp_path / "o")) == 30
    hf = steerable("export", root, "--recipe", "subtask", "--out", str(tmp_path / "h"), "--format", "hf",
                   "--max_samples", "5")
    assert hf.returncode == 0, hf.stderr
    assert (tmp_path / "h" / "dataset_info.json").is_file()
    bad = {
        "no built-in recipe named 'nope'": ("--recipe", "nope", "--out", str(tmp_path / "x")),
        "is not empty": ("--recipe", "hirobot", "--out", str(tmp_path / "o")),
        "does not have": ("--recipe", "hirobot", "--camera_map", "top=observation.images.front",
                          "--out", str(tmp_path / "y")),
        "episode 7 is not in": ("--recipe", "hirobot", "--episodes", "0,7", "--out", str(tmp_path / "z")),
    }
    for message, args in bad.items():
        run = steerable("export", root, *args)
        assert run.returncode == 2, (args, run.stderr)
        lines = run.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("steerable: error:") and message in lines[0]
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists() and not (tmp_path / "z").exists()


def test_cli_says_so_in_one_line_and_exits_1_when_nothing_is_exported(
    ds: LeRobotDataset, so101: Path, tmp_path: Path
) -> None:
    bare = steerable("export", str(so101), "--recipe", "subtask", "--out", str(tmp_path / "bare"))
    assert bare.returncode == 1, bare.stderr
    assert bare.stderr.count("\n") == 1 and "is not annotated (no language columns)" in bare.stderr
    assert "steerable annotate" in bare.stderr and not (tmp_path / "bare").exists()
    recipe = tmp_path / "trace.yaml"  # no trace rows in the dataset: every frame renders nothing
    recipe.write_text("messages:\n  - {role: assistant, content: '${t}', stream: high_level, target: true,"
                      " if_present: t}\nbindings: {t: 'emitted_at(t, style=trace, camera=observation.images.top)'}\n")
    empty = steerable("export", str(ds.root), "--recipe", str(recipe), "--out", str(tmp_path / "empty"))
    assert empty.returncode == 1, empty.stderr
    assert empty.stderr.count("\n") == 1 and "rendered no sample" in empty.stderr and "--fallback task" in empty.stderr
