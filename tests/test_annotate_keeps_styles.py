"""An annotate run replaces only the styles its modules produce: a motion-only run on a dataset with
oracle language keeps its interjections and speech, and its plans and memory where it does not name
the episode's steps (`--motion.name_from_task false` here); where it names them, its own plan and
memory replace the stored ones, so they agree with its subtasks."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from annotate_helpers import steerable
from steerable.dataset import open_dataset
from steerable.dataset.writer import EpisodeLanguage, write_language
from steerable.language import speech_row


def _styles(root: Path) -> Counter[str]:
    ds = open_dataset(root)
    out: Counter[str] = Counter()
    for ep in ds.episodes:
        table = ds.read_episode(ep.episode_index, ["language_persistent", "language_events"])
        out.update(r["style"] for r in table.column("language_persistent")[0].as_py())
        for cell in table.column("language_events").to_pylist():
            out.update(r["style"] or "tool_call" for r in cell or [])
    return out


def _says(root: Path, episode: int) -> int:
    cells = open_dataset(root).read_episode(episode, ["language_events"]).column("language_events").to_pylist()
    return sum(1 for cell in cells for r in cell or [] if r["style"] is None)


@pytest.fixture(scope="module")
def oracle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from steerable.synthetic import generate_synthetic

    root = tmp_path_factory.mktemp("keep") / "ds"
    generate_synthetic(root, episodes=2, cameras=("top",), seed=3, with_language=True, interjection_rate=1.0)
    return root


def test_motion_run_keeps_the_oracle_plan_memory_and_speech(oracle: Path, tmp_path: Path) -> None:
    before = _styles(oracle)
    assert before["plan"] and before["memory"] and before["interjection"] and before["tool_call"]
    out = tmp_path / "out"
    run = steerable("annotate", str(oracle), "--output_dir", str(out), "--motion.name_from_task", "false")
    assert run.returncode == 0, run.stderr
    after = _styles(out)
    for kept in ("plan", "memory", "interjection", "tool_call"):
        assert after[kept] == before[kept], f"{kept} rows were not kept: {before} -> {after}"
    assert after["motion"] > 0 and after["subtask"] > 0
    producers = json.loads((out / "meta/steerable_provenance.json").read_text())["producers"]
    assert producers["motion"] == producers["subtask"] == "heuristic:motion"
    assert producers["plan"] == "synthetic:oracle", "make-dataset --with_language names its rows' producer"
    # Running it again replaces the motion rows instead of adding a second copy.
    again = steerable("annotate", str(out), "--force", "--motion.name_from_task", "false")
    assert again.returncode == 0, again.stderr
    assert _styles(out) == after


def test_a_named_motion_run_writes_plan_and_memory_that_agree_with_its_subtasks(oracle: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    run = steerable("annotate", str(oracle), "--output_dir", str(out))
    assert run.returncode == 0, run.stderr
    assert "named from the task's steps" in run.stdout
    ds = open_dataset(out)
    for ep in ds.episodes:
        rows = ds.read_episode(ep.episode_index, ["language_persistent"]).column("language_persistent")[0].as_py()
        subtasks = [r for r in rows if r["style"] == "subtask"]
        plans = {r["timestamp"]: r["content"] for r in rows if r["style"] == "plan"}
        memories = [r for r in rows if r["style"] == "memory"]
        # One plan per subtask, listing it and what follows it (and none of the oracle's left over).
        assert sorted(plans) == [r["timestamp"] for r in subtasks]
        for k, row in enumerate(subtasks):
            remaining = [f"{i}. {s['content']}" for i, s in enumerate(subtasks[k:], 1)]
            assert plans[row["timestamp"]].splitlines() == remaining
        assert [r["timestamp"] for r in memories] == [r["timestamp"] for r in subtasks[1:]]
        assert all("cube" in r["content"] for r in subtasks), subtasks
    assert _styles(out)["interjection"] == _styles(oracle)["interjection"]


def test_write_language_replaces_only_the_named_styles(oracle: Path, tmp_path: Path) -> None:
    import shutil

    root = shutil.copytree(oracle, tmp_path / "ds")
    before = _styles(root)
    ds = open_dataset(root)
    t = float(ds.episode_timestamps(0)[5])
    update = EpisodeLanguage(
        persistent=[{"role": "assistant", "content": "go", "style": "subtask", "timestamp": 0.0, "camera": None,
                     "tool_calls": None}],
        events=[(t, speech_row("hello"))],
        replaces=frozenset({"subtask", None}),
    )  # fmt: skip
    write_language(ds, {0: update})
    after = _styles(root)
    first = open_dataset(root).read_episode(0, ["language_persistent"]).column("language_persistent")[0].as_py()
    assert [r["content"] for r in first if r["style"] == "subtask"] == ["go"]
    assert after["plan"] == before["plan"] and after["memory"] == before["memory"]
    assert after["interjection"] == before["interjection"]
    assert after["tool_call"] == before["tool_call"] - _says(oracle, 0) + 1
    # Without `replaces` the update is the episode's whole language (the old contract).
    write_language(open_dataset(root), {0: EpisodeLanguage(update.persistent, update.events)})
    rows = open_dataset(root).read_episode(0, ["language_persistent"]).column("language_persistent")[0].as_py()
    assert [r["style"] for r in rows] == ["subtask"]
