"""`steerable annotate` when parts of the work fail: dead servers, an unreadable shard, missing videos.

Each failure costs only what it touches, is named with exit status 1, and is redone on a re-run.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from annotate_helpers import copy_dataset, make_synthetic, steerable, summary_of
from pandas_dataset import make_pandas_dataset
from steerable.dataset import open_dataset
from steerable.language import rows_from_arrow
from steerable.testing.server import TestServer
from steerable.testing.server.plausible import plausible_responder

MODEL = "test-model"


def _vlm(url: str) -> list[str]:
    return ["--vlm.base_url", url, "--vlm.model_id", MODEL, "--vlm.backoff_base_s", "0.01"]


def _styles(root: Path, episode: int) -> list[str | None]:
    table = open_dataset(root).read_episode(episode, ["language_persistent", "language_events"])
    persistent = rows_from_arrow(table.column("language_persistent"))[0]
    events = [r for rows in rows_from_arrow(table.column("language_events")) for r in rows]
    return [r["style"] for r in persistent + events]


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_synthetic(tmp_path_factory.mktemp("syn") / "ds", episodes=1)


def test_a_module_whose_every_call_failed_is_failed_and_redone(synthetic: Path, tmp_path: Path) -> None:
    root = copy_dataset(synthetic, tmp_path / "ds")
    vqa_only = ["--plan.enabled", "false", "--interjections.enabled", "false"]
    with TestServer(model_ids=[MODEL], latency_s=5.0) as dead:  # answers /models, never a chat call in time
        first = steerable(
            "annotate", "--root", str(root), *_vlm(dead.url), *vqa_only,
            "--vlm.request_timeout_s", "0.3", "--vlm.max_retries", "0",
        )
    assert first.returncode == 1, first.stdout + first.stderr
    summary = summary_of(root)
    (failure,) = summary["failures"]
    assert list(failure["failed_modules"]) == ["vqa"] and failure["written_modules"] == ["motion"]
    assert summary["per_module"]["vqa"]["failed"] == 1 and summary["per_module"]["vqa"]["episodes"] == 0
    assert "failed: episode 0: vqa: " in first.stdout and "(kept: motion)" in first.stdout
    assert "vqa" not in _styles(root, 0)

    with TestServer(responder=plausible_responder, model_ids=[MODEL]) as healthy:
        again = steerable("annotate", "--root", str(root), *_vlm(healthy.url), *vqa_only)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "annotated 1/1" in again.stdout
    assert _styles(root, 0).count("vqa") > 0  # the failed run's empty output was not resumed
    assert not any("dropped" in note for note in summary_of(root)["notes"])  # nor its notes


@pytest.mark.parametrize("debug", [False, True])
def test_an_unreadable_shard_fails_its_episodes_only(tmp_path: Path, debug: bool) -> None:
    """The same with --debug, which shows each failure's traceback but keeps the exit status."""
    root = make_pandas_dataset(tmp_path / "pd", episodes=5, per_file=2)  # shards: 0-1, 2-3, 4
    broken = root / "data" / "chunk-000" / "file-001.parquet"
    data = broken.read_bytes()
    broken.write_bytes(data[: len(data) // 2])
    torn = broken.read_bytes()
    result = steerable(*(["--debug"] if debug else []), "annotate", "--root", str(root))
    assert result.returncode == 1, result.stdout + result.stderr
    assert ("Traceback" in result.stderr) == debug
    summary = summary_of(root)
    assert sorted(f["episode_index"] for f in summary["failures"]) == [2, 3]
    assert all("file-001.parquet" in f["reason"] for f in summary["failures"])
    assert "failed: episode 2: " in result.stdout and "failed: episode 3: " in result.stdout
    assert summary["episodes_annotated"] == 3 and summary["written"]["episodes"] == 3
    for episode in (0, 1, 4):
        assert "motion" in _styles(root, episode)
    assert broken.read_bytes() == torn  # left as it was


def test_episodes_without_video_still_get_heuristic_subtasks(writable_copy) -> None:
    """so101_record_test has no mp4 files: plan and vqa fail there, motion's subtasks stand in."""
    root = writable_copy("so101_record_test")
    with TestServer(responder=plausible_responder, model_ids=[MODEL]) as server:
        result = steerable("annotate", "--root", str(root), "--only_episodes", "0,1", *_vlm(server.url))
    assert result.returncode == 1, result.stdout + result.stderr
    summary = summary_of(root)
    assert len(summary["failures"]) == 2
    for failure in summary["failures"]:
        assert "plan" in failure["failed_modules"] and failure["written_modules"] == ["motion"]
    for episode in (0, 1):
        styles = _styles(root, episode)
        assert "motion" in styles and "subtask" in styles
    assert summary["producers"]["subtask"] == "heuristic:motion"
    assert any("no video" in note and "heuristic" in note for note in summary["notes"])


def test_stand_in_subtasks_give_way_once_the_video_is_back(synthetic: Path, tmp_path: Path) -> None:
    """Re-run after restoring a missing video: motion's staged stand-in subtasks are resumed, but the
    plan module's subtasks are the only ones written."""
    root = copy_dataset(synthetic, tmp_path / "ds")
    (video,) = (root / "videos").rglob("*.mp4")
    aside = tmp_path / "aside.mp4"
    video.rename(aside)
    args = ["--interjections.enabled", "false", "--vqa.enabled", "false"]
    with TestServer(responder=plausible_responder, model_ids=[MODEL]) as server:
        missing = steerable("annotate", "--root", str(root), *_vlm(server.url), *args)
        assert missing.returncode == 1, missing.stdout + missing.stderr
        assert summary_of(root)["producers"]["subtask"] == "heuristic:motion"
        aside.rename(video)
        back = steerable("annotate", "--root", str(root), *_vlm(server.url), *args)
    assert back.returncode == 0, back.stdout + back.stderr
    summary = summary_of(root)
    assert summary["module_runs_resumed"] == 1  # motion, with its stand-in subtasks
    assert summary["producers"]["subtask"] == MODEL and summary["heuristic_subtasks"] is False
    assert "HEURISTIC" not in back.stdout
