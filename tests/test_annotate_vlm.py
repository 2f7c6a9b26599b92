"""`steerable annotate` through the OpenAI-compatible HTTP backend, against the local test server."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from annotate_helpers import REPO, copy_dataset, file_hashes, make_synthetic, steerable, summary_of
from pandas_dataset import make_pandas_dataset
from steerable.dataset import open_dataset
from steerable.language import rows_from_arrow, validate_rows
from steerable.testing.server import FaultPlan, TestServer
from steerable.testing.server.plausible import plausible_responder

MODEL = "test-model"


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_synthetic(tmp_path_factory.mktemp("syn") / "ds")


@pytest.fixture
def server():
    with TestServer(responder=plausible_responder, model_ids=[MODEL]) as srv:
        yield srv


def _vlm(url: str) -> list[str]:
    return ["--vlm.base_url", url, "--vlm.model_id", MODEL, "--vlm.backoff_base_s", "0.01"]


def _episode_rows(root: Path, episode: int) -> tuple[list[dict], list[tuple[float, dict]]]:
    table = open_dataset(root).read_episode(episode, ["timestamp", "language_persistent", "language_events"])
    persistent = rows_from_arrow(table.column("language_persistent"))[0]
    stamps = table.column("timestamp").to_pylist()
    events = [
        (t, row)
        for t, rows in zip(stamps, rows_from_arrow(table.column("language_events")), strict=True)
        for row in rows
    ]
    return persistent, events


def test_all_modules_write_valid_rows(synthetic: Path, tmp_path: Path, server: TestServer) -> None:
    root = copy_dataset(synthetic, tmp_path / "ds")
    result = steerable("annotate", "--root", str(root), *_vlm(server.url))
    assert result.returncode == 0, result.stderr
    summary = summary_of(root)
    assert summary["modules"] == ["motion", "plan", "interjections", "vqa"]
    assert summary["episodes_annotated"] == 3 and summary["failures"] == []
    assert summary["heuristic_subtasks"] is False
    ds = open_dataset(root)
    for ep in ds.episodes:
        persistent, events = _episode_rows(root, ep.episode_index)
        styles = {r["style"] for r in persistent} | {r["style"] for _, r in events}
        assert {"subtask", "plan", "memory", "task_aug", "motion", "interjection", "vqa", None} <= styles
        problems = validate_rows(
            persistent, events, frame_timestamps=ds.episode_timestamps(ep.episode_index), cameras=ds.camera_keys
        )
        assert problems == []
        says = [r for _, r in events if r["style"] is None]
        assert all(r["tool_calls"][0]["function"]["name"] == "say" for r in says)
    assert server.stats.response_format_requests > 0  # structured output was asked for
    assert json.loads(ds.root.joinpath("meta", "info.json").read_text())["tools"][0]["function"]["name"] == "say"


def test_real_fixture_with_video(writable_copy, server: TestServer) -> None:
    root = writable_copy("lingzu_teleop_4")
    result = steerable("annotate", "--root", str(root), "--only_episodes", "0,1", *_vlm(server.url))
    assert result.returncode == 0, result.stderr
    summary = summary_of(root)
    assert summary["episodes_annotated"] == 2, summary["failures"]
    persistent, events = _episode_rows(root, 0)
    assert any(r["style"] == "subtask" for r in persistent)
    assert all(r["camera"] == "image" for _, r in events if r["style"] == "vqa")
    assert _episode_rows(root, 2)[0] == []


def test_injected_faults_are_retried_or_reported(synthetic: Path, tmp_path: Path) -> None:
    root = copy_dataset(synthetic, tmp_path / "ds")
    faults = FaultPlan(rate=0.2, seed=3, timeout_s=5.0)
    with TestServer(responder=plausible_responder, model_ids=[MODEL], faults=faults) as srv:
        result = steerable(
            "annotate", "--root", str(root), *_vlm(srv.url), "--vlm.request_timeout_s", "1", "--vlm.max_retries", "4"
        )
        injected = sum(srv.stats.faults.values())
    summary = summary_of(root)
    assert result.returncode == (1 if summary["failures"] else 0), result.stderr
    assert injected > 0 and summary["vlm"].get("retries", 0) > 0
    annotated = summary["episodes_annotated"]
    assert annotated + len(summary["failures"]) == 3
    assert all(f["reason"] for f in summary["failures"])


def test_missing_video_fails_that_episode_with_the_file_named(writable_copy, server: TestServer) -> None:
    """The video modules fail with the file named; motion needs no video, so its rows are written."""
    root = writable_copy("so101_record_test")
    result = steerable("annotate", "--root", str(root), "--only_episodes", "0", *_vlm(server.url))
    assert result.returncode == 1, result.stderr
    (failure,) = summary_of(root)["failures"]
    assert "file-000.mp4" in failure["reason"]
    assert failure["written_modules"] == ["motion"] and "plan" in failure["failed_modules"]
    assert result.stdout.splitlines()[-2].startswith("failed: episode 0: ")
    persistent, _ = _episode_rows(root, 0)
    # motion's subtasks, named from the task with their plan and memory, stand in for plan's
    assert {r["style"] for r in persistent} == {"motion", "subtask", "plan", "memory"}


@pytest.mark.parametrize("case", ["unreachable", "wrong_model", "no_videos"])
def test_model_problems_stop_before_anything_is_written(
    case: str, synthetic: Path, tmp_path: Path, server: TestServer
) -> None:
    if case == "no_videos":
        root = make_pandas_dataset(tmp_path / "pd")
        args = _vlm(server.url)
        message = "no video features"
    else:
        root = copy_dataset(synthetic, tmp_path / "ds")
        url = "http://127.0.0.1:9/v1" if case == "unreachable" else server.url
        args = ["--vlm.base_url", url, "--vlm.model_id", "not-served" if case == "wrong_model" else MODEL]
        message = "cannot reach" if case == "unreachable" else "not-served"
    before = file_hashes(root, skip_work_dir=False)
    result = steerable("annotate", "--root", str(root), *args)
    assert result.returncode == 2, result.stdout + result.stderr
    assert message in result.stderr and "Traceback" not in result.stderr
    assert file_hashes(root, skip_work_dir=False) == before


def test_killed_run_resumes_to_the_same_bytes(synthetic: Path, tmp_path: Path) -> None:
    """SIGKILL mid-run, re-run: finished episodes are not redone and the result equals a clean run."""
    clean = copy_dataset(synthetic, tmp_path / "clean")
    killed = copy_dataset(synthetic, tmp_path / "killed")
    with TestServer(responder=plausible_responder, model_ids=[MODEL], latency_s=0.05) as srv:
        args = [*_vlm(srv.url), "--executor.episode_parallelism", "1"]
        assert steerable("annotate", "--root", str(clean), *args).returncode == 0
        calls_clean = srv.stats.chat_requests
        proc = subprocess.Popen(
            [sys.executable, "-m", "steerable.cli.main", "annotate", "--root", str(killed), *args],
            cwd=REPO,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        staging = killed / ".steerable" / "staging"

        def finished_episodes() -> int:
            modules = ("motion", "plan", "interjections", "vqa")
            return sum(all((d / f"{m}.done.json").is_file() for m in modules) for d in staging.glob("episode_*"))

        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and finished_episodes() < 1:
            time.sleep(0.01)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        finished = finished_episodes()
        assert 1 <= finished < 3, "the kill should land mid-run"
        before_resume = srv.stats.chat_requests
        result = steerable("annotate", "--root", str(killed), *args)
        assert result.returncode == 0, result.stderr
        resumed_calls = srv.stats.chat_requests - before_resume
    assert summary_of(killed)["episodes_resumed"] >= finished
    assert resumed_calls < calls_clean  # finished episodes made no new calls
    assert file_hashes(killed) == file_hashes(clean)


def test_snapping_to_keystates_moves_vlm_boundaries_onto_real_events(
    synthetic: Path, tmp_path: Path, server: TestServer
) -> None:
    """The placeholder model splits each window evenly; snapping pulls those cuts onto motion pauses."""
    from steerable.eval.ground_truth import evaluate_against_ground_truth

    errors = {}
    for snap in ("false", "true"):
        root = copy_dataset(synthetic, tmp_path / f"snap_{snap}")
        result = steerable(
            "annotate", "--root", str(root), *_vlm(server.url), "--plan.snap_to_keystates", snap,
            "--interjections.enabled", "false", "--vqa.enabled", "false",
        )
        assert result.returncode == 0, result.stderr
        errors[snap] = evaluate_against_ground_truth(open_dataset(root)).boundary_mae_s
    assert errors["true"] < errors["false"]
