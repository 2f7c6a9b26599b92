"""`steerable annotate` with no VLM: the motion annotator on synthetic and real data, via the CLI."""

from __future__ import annotations

from pathlib import Path

import pytest

from annotate_helpers import copy_dataset, file_hashes, make_synthetic, steerable, summary_of
from steerable.dataset import open_dataset
from steerable.language import rows_from_arrow, validate_rows


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_synthetic(tmp_path_factory.mktemp("syn") / "ds")


def _persistent(root: Path, episode: int) -> list[dict]:
    table = open_dataset(root).read_episode(episode, ["language_persistent"])
    return rows_from_arrow(table.column("language_persistent"))[0]


def test_motion_only_run_writes_valid_rows_and_resumes(synthetic: Path, tmp_path: Path) -> None:
    root = copy_dataset(synthetic, tmp_path / "ds")
    first = steerable("annotate", "--root", str(root))
    assert first.returncode == 0, first.stderr
    assert "HEURISTIC" in first.stdout
    ds = open_dataset(root)
    for ep in ds.episodes:
        rows = _persistent(root, ep.episode_index)
        styles = {r["style"] for r in rows}
        assert {"motion", "subtask"} <= styles
        subtasks = [r for r in rows if r["style"] == "subtask"]
        assert subtasks[0]["timestamp"] == 0.0  # gap-free cover from the first frame
        assert validate_rows(rows, [], frame_timestamps=ds.episode_timestamps(ep.episode_index)) == []
    summary = summary_of(root)
    assert summary["heuristic_subtasks"] is True
    assert summary["episodes_annotated"] == 3 and summary["failures"] == []
    before = file_hashes(root)
    again = steerable("annotate", "--root", str(root))
    assert again.returncode == 0, again.stderr
    assert "3 resumed from staging" in again.stdout
    assert file_hashes(root) == before  # resuming rewrites the same bytes


def test_output_dir_leaves_source_untouched(synthetic: Path, tmp_path: Path) -> None:
    src = copy_dataset(synthetic, tmp_path / "src")
    before = file_hashes(src, skip_work_dir=False)
    out = tmp_path / "out"
    result = steerable("annotate", "--root", str(src), "--output_dir", str(out))
    assert result.returncode == 0, result.stderr
    assert file_hashes(src, skip_work_dir=False) == before
    assert open_dataset(out).has_language and not open_dataset(src).has_language


def test_only_episodes_touches_nothing_else(synthetic: Path, tmp_path: Path) -> None:
    root = copy_dataset(synthetic, tmp_path / "ds")
    result = steerable("annotate", "--root", str(root), "--only_episodes", "1")
    assert result.returncode == 0, result.stderr
    assert _persistent(root, 1)
    assert _persistent(root, 0) == [] and _persistent(root, 2) == []
    # Episode 0 gets rows later; episode 1 keeps its own.
    rows_1 = _persistent(root, 1)
    assert steerable("annotate", "--root", str(root), "--only_episodes", "0").returncode == 0
    assert _persistent(root, 1) == rows_1 and _persistent(root, 0)


def test_real_fixture_without_videos_gets_motion_rows(writable_copy) -> None:
    root = writable_copy("so101_record_test")
    result = steerable("annotate", "--root", str(root))
    assert result.returncode == 0, result.stderr
    for ep in range(4):
        rows = _persistent(root, ep)
        contents = {r["content"] for r in rows if r["style"] == "motion"}
        assert {"close gripper", "open gripper"} <= contents


def test_real_fixture_without_gripper_says_so(writable_copy) -> None:
    root = writable_copy("lingzu_teleop_4")
    result = steerable("annotate", "--root", str(root))
    assert result.returncode == 0, result.stderr
    assert "gripper" in result.stdout  # the note explains why there are no gripper events
    assert any(r["style"] == "motion" for r in _persistent(root, 0))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--root", "/nonexistent/ds"], "does not exist"),
        (["--plan.frames_per_secnd", "2"], "did you mean --plan.frames_per_second"),
        (["--only_episodes", "99"], "episode(s) [99]"),
        (["--push_to_hub"], "--push_to_hub needs a target"),
        (["--plan.derive_task_from_video", "sometimes"], "derive_task_from_video"),
        (["--vlm.camera_key", "observation.images.nope", "--vlm.base_url", "http://127.0.0.1:9/v1"], "camera"),
    ],
)
def test_bad_input_is_one_clear_line_and_writes_nothing(
    synthetic: Path, tmp_path: Path, args: list[str], message: str
) -> None:
    root = copy_dataset(synthetic, tmp_path / "ds")
    before = file_hashes(root, skip_work_dir=False)
    if args[0] != "--root":
        args = ["--root", str(root), *args]
    result = steerable("annotate", *args)
    assert result.returncode == 2, result.stdout + result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("steerable: error:")]
    assert len(lines) == 1 and message in lines[0], result.stderr
    assert "Traceback" not in result.stderr
    assert file_hashes(root, skip_work_dir=False) == before
