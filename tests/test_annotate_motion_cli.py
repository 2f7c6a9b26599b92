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
    assert "(resumed from staging: 3 of 3 module runs, 3 whole episodes)" in again.stdout
    assert file_hashes(root) == before  # resuming rewrites the same bytes


def test_a_partial_resume_counts_the_module_runs_it_saved(synthetic: Path, tmp_path: Path) -> None:
    root = copy_dataset(synthetic, tmp_path / "ds")
    assert steerable("annotate", "--root", str(root), "--only_episodes", "1").returncode == 0
    again = steerable("annotate", "--root", str(root))
    assert again.returncode == 0, again.stderr
    assert "(resumed from staging: 1 of 3 module runs, 1 whole episode)" in again.stdout
    assert summary_of(root)["module_runs_resumed"] == 1


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
        (["--only_episodes", "99"], "episode(s) 99 that"),
        (["--push_to_hub"], "--push_to_hub needs a target"),
        (["--plan.derive_task_from_video", "sometimes"], "derive_task_from_video"),
        (["--plan.snap_to_keystates", "true", "--motion.enabled", "false"], "snap_to_keystates needs"),
        (["--vqa.restrict_to_default_camera", "true", "--vqa.cameras", "top"], "not both"),
        (
            ["--plan.enabled", "false", "--vqa.enabled", "false", "--interjections.enabled", "false",
             "--motion.enabled", "false"],
            "nothing to annotate",
        ),
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


def test_help_lists_every_flag_with_its_default() -> None:
    from steerable.annotate.config import AnnotateConfig
    from steerable.cli.flags import iter_flags

    result = steerable("annotate", "--help")
    assert result.returncode == 0
    for name, _, _, _ in iter_flags(AnnotateConfig):  # DATASET is shown as the word, with its flag
        shown = f"{name.upper()} (optional; or --{name})" if name in AnnotateConfig.positional else f"--{name}="
        assert shown in result.stdout, name
    assert "--plan.frames_per_second=2.0" in result.stdout


def test_yaml_config_file_and_flags_override_it(synthetic: Path, tmp_path: Path) -> None:
    from steerable.annotate.config import AnnotateConfig
    from steerable.cli.flags import parse_config
    from steerable.errors import ConfigError

    root = copy_dataset(synthetic, tmp_path / "ds")
    config = tmp_path / "run.yaml"
    config.write_text(f"root: {root}\nmotion:\n  subtask_granularity: fine\nonly_episodes: [0]\n")
    cfg = parse_config(AnnotateConfig, ["--config", str(config), "--only_episodes", "1,2"])
    assert cfg.root == root and cfg.motion.subtask_granularity == "fine" and cfg.only_episodes == [1, 2]
    result = steerable("annotate", "--config", str(config))
    assert result.returncode == 0, result.stderr
    assert any(r["content"].startswith("grasp the ") for r in _persistent(root, 0))  # fine granularity
    config.write_text("root: [unclosed\n")
    with pytest.raises(ConfigError, match=r"run.yaml:\d+: invalid YAML"):
        parse_config(AnnotateConfig, ["--config", str(config)])
