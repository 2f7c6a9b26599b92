"""The `steerable` command itself: --version, --help, info, and how user errors look."""

from __future__ import annotations

import json
from pathlib import Path

from annotate_helpers import steerable
from steerable import __version__


def test_version_and_help() -> None:
    version = steerable("--version")
    assert version.returncode == 0 and version.stdout.strip() == f"steerable {__version__}"
    helped = steerable("--help")
    for command in ("info", "make-dataset", "annotate", "sheets", "render", "recipes", "export", "eval", "demo"):
        assert command in helped.stdout


def test_info_json_on_a_real_fixture(lingzu: Path) -> None:
    result = steerable("info", str(lingzu), "--json")
    assert result.returncode == 0, result.stderr
    info = json.loads(result.stdout)
    assert info["total_episodes"] == 4 and info["total_frames"] == 1700 and info["fps"] == 30
    assert info["cameras"]["image"]["files_present"] == 4
    assert info["features"]["state"]["shape"] == [34]
    assert info["tasks"] == ["lingzu teleoperation"] and info["language"] is None
    human = steerable("info", str(lingzu))
    assert "1700 frames at 30 fps" in human.stdout and "Language: none" in human.stdout


def test_info_counts_language_rows_by_style(tmp_path: Path) -> None:
    from train_data import annotate_synthetic

    root = annotate_synthetic(tmp_path / "ds", episodes=2).root
    info = json.loads(steerable("info", str(root), "--json").stdout)
    language = info["language"]
    assert language["persistent"] == {"memory": 4, "plan": 4, "subtask": 6, "task_aug": 4}
    assert language["events"] == {"interjection": 2, "tool_call": 2, "vqa": 8}
    assert language["tools"] == ["say"]


def test_user_errors_are_one_line_with_status_2_and_debug_shows_the_traceback(tmp_path: Path) -> None:
    missing = str(tmp_path / "nope")
    plain = steerable("info", missing)
    assert plain.returncode == 2
    assert plain.stderr.strip().count("\n") == 0 and "does not exist" in plain.stderr
    debug = steerable("--debug", "info", missing)  # still a user error: status 2, now with the traceback
    assert debug.returncode == 2 and "Traceback" in debug.stderr and "does not exist" in debug.stderr


def test_make_dataset_range_errors_name_their_flag(tmp_path: Path) -> None:
    for flags, named in ((["--episodes", "0"], "--episodes"), (["--fps", "500"], "--fps"),
                         (["--interjection_rate", "2"], "--interjection_rate"), (["--cameras", "side"], "--cameras")):
        result = steerable("make-dataset", "synthetic", "--out", str(tmp_path / "ds"), *flags)
        assert result.returncode == 2 and named in result.stderr, result.stderr
        assert len(result.stderr.strip().splitlines()) == 1 and not (tmp_path / "ds").exists()


def test_a_yaml_config_gives_an_argparse_commands_options_and_flags_given_too_win(lingzu: Path,
                                                                                 tmp_path: Path) -> None:
    config = tmp_path / "info.yaml"
    config.write_text("json: true\n")
    shown = steerable("info", str(lingzu), "--config", str(config))
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["total_episodes"] == 4
    made_yaml = tmp_path / "make.yaml"
    made_yaml.write_text(f"out: {tmp_path / 'ds'}\nepisodes: 5\nfps: 10\ncameras: [top]\n")
    made = steerable("make-dataset", "synthetic", "--config", str(made_yaml), "--episodes", "1")
    assert made.returncode == 0, made.stderr
    info = json.loads(steerable("info", str(tmp_path / "ds"), "--json").stdout)
    assert info["total_episodes"] == 1 and info["fps"] == 10 and list(info["cameras"]) == ["observation.images.top"]
    config.write_text("jsno: true\n")
    typo = steerable("info", str(lingzu), "--config", str(config))
    assert typo.returncode == 2 and "unknown key jsno (did you mean json?)" in typo.stderr
    assert len(typo.stderr.strip().splitlines()) == 1
