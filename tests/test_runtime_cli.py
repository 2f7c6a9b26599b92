"""`steerable run` as a user runs it: commands files, evaluation, bad input, Ctrl-C."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from annotate_helpers import REPO, steerable
from runtime_helpers import recorded_language
from steerable.cli.main import main
from steerable.dataset.lerobot import LeRobotDataset


def test_commands_file_runs_to_completion_and_exits_when_idle(tmp_path: Path) -> None:
    commands = tmp_path / "cmds.txt"
    commands.write_text("# a comment\n/task put the red cube in the left bin\n@2.5s no, the right bin\n/status\n")
    result = steerable("run", "--env", "sim", "--seed", "7", "--commands", str(commands))
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "scripted planner (test double)" in out and "scripted controller (test double)" in out
    assert "[   2.5s] interjection: no, the right bin" in out
    assert "say: OK, I will put the red cube in the yellow bin instead." in out
    assert "done: task complete" in out and "mode: action (task done)" in out
    assert out.rstrip().endswith("final (task done): The red cube is in the yellow bin.")


def test_eval_json_reports_success_overall_and_by_group() -> None:
    result = steerable("run", "--env", "sim", "--eval_episodes", "6", "--eval_interjections", "--json",
                       "--workers", "2")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["episodes"] == 6 and data["success_rate"] == 1.0
    assert data["high_level"] == "scripted" and data["by_interjection"]["with"]["episodes"] == 6
    table = steerable("run", "--eval_episodes", "4", "--workers", "2")
    assert table.returncode == 0 and "overall" in table.stdout and "without interjection" in table.stdout
    title = " ".join(table.stdout.split())  # the title wraps at the table's width
    assert "scripted planner (test double) · low level scripted controller (test double) · easy tasks" in title


def test_bad_input_is_one_line_with_status_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.txt"
    bad.write_text("/task put the red cube in the blue bin\n/dance now\n@x no\n")
    cases = [
        (["--commands", str(bad)], "bad.txt:2: unknown command /dance"),
        (["--commands", str(bad)], "bad.txt:3: bad time prefix"),
        (["--task", "  "], "--task is empty"),
        (["--high_level", "oracle"], "--high_level 'oracle': choose one of scripted, vlm, policy, none"),
        (["--high_level", "vlm"], "--high_level vlm needs --vlm.base_url"),
        (["--low_level", "policy"], "needs --policy.path"),
        (["--commands", str(tmp_path / "missing.txt")], "cannot read it"),
        (["--tts", "festival"], "--tts 'festival'"),
        (["--eval_episodes", "0"], "--eval_episodes must be at least 1"),
    ]
    for args, message in cases:
        assert main(["run", "--env", "sim", *args]) == 2, args
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err, (args, err)
        assert len(err.strip().splitlines()) == 1, err
    # The same through a real process: one line, status 2.
    result = steerable("run", "--commands", str(bad))
    assert result.returncode == 2 and result.stderr.startswith("steerable: error: ")


def test_a_task_the_scene_cannot_do_is_reported_and_the_run_ends(tmp_path: Path) -> None:
    commands = tmp_path / "c.txt"
    commands.write_text("/task juggle three eggs\n")
    result = steerable("run", "--seed", "7", "--commands", str(commands))
    assert result.returncode == 2, result.stderr  # a line of the file the scene cannot carry out (#34)
    assert f"{commands}:1: cannot read task 'juggle three eggs'" in result.stderr
    assert "cannot read task 'juggle three eggs'" in result.stdout and "holding still" in result.stdout


def test_piped_lines_drive_a_run(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "steerable.cli.main", "run", "--seed", "7"],
        input="/task put the pink cube in the blue bin\n/ask where is the pink cube?\n",
        capture_output=True, text=True, timeout=120, env=env, cwd=REPO,
    )
    assert done.returncode == 0, done.stderr
    assert "answer: The pink cube is in the blue bin." in done.stdout


def test_bad_piped_lines_are_named_by_line_before_anything_runs() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "steerable.cli.main", "run", "--seed", "7"],
        input="/task put the pink cube in the blue bin\n/dance\n@x no\n",
        capture_output=True, text=True, timeout=120, cwd=REPO,
    )
    assert done.returncode == 2 and done.stdout == "", done.stdout
    assert "stdin:2: unknown command /dance" in done.stderr and "stdin:3: bad time prefix" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_ctrl_c_stops_the_robot_and_closes_the_recording_so_it_loads(tmp_path: Path) -> None:
    commands = tmp_path / "c.txt"
    commands.write_text("@60s /status\n")
    record = tmp_path / "rec"
    proc = subprocess.Popen(
        [sys.executable, "-m", "steerable.cli.main", "run", "--seed", "7", "--realtime", "--record", str(record),
         "--task", "put the red cube in the left bin, then the orange cube in the right bin",
         "--commands", str(commands)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert proc.stdout is not None
    seen = ""
    deadline = time.monotonic() + 60
    while "subtask: place the red cube in" not in seen and time.monotonic() < deadline:
        seen += proc.stdout.readline()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "interrupted: robot stopped" in err and "Traceback" not in err
    assert f"recorded: {record}" in out
    ds = LeRobotDataset(record)
    assert ds.info.total_episodes == 1 and ds.info.total_frames > 30
    persistent, _, problems = recorded_language(record)
    assert problems == [] and any(r["content"] == "place the red cube in the blue bin" for r in persistent)


def test_direct_task_mode_runs_the_operators_words(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    commands = tmp_path / "c.txt"
    commands.write_text("/task pick up the red cube\nplace it in the right bin\n")
    assert main(["run", "--seed", "7", "--high_level", "none", "--commands", str(commands)]) == 0
    out = capsys.readouterr().out
    assert "high level: none (direct task)" in out
    assert "done: pick up the red cube" in out and "done: place it in the right bin" in out
    assert "The red cube is in the yellow bin." in out


def test_a_record_folder_that_cannot_be_written_stops_before_the_run(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "afile").write_text("not a folder")
    (tmp_path / "cmds.txt").write_text("/task put the red cube in the left bin\n")
    args = ["run", "--env", "sim", "--seed", "7", "--commands", str(tmp_path / "cmds.txt"),
            "--record", str(tmp_path / "afile" / "rec")]
    assert main(args) == 2
    out, err = capsys.readouterr()
    assert "afile is a file, not a folder" in err and len(err.strip().splitlines()) == 1, err
    assert "task:" not in out  # refused before the robot moved, not after the session was lost


def test_a_recording_says_who_wrote_its_language(tmp_path: Path) -> None:
    commands = tmp_path / "cmds.txt"
    commands.write_text("/task put the red cube in the left bin\n@2.5s no, the right bin\n")
    record = tmp_path / "rec"
    assert main(["run", "--env", "sim", "--seed", "7", "--commands", str(commands), "--record", str(record)]) == 0
    producers = json.loads((record / "meta" / "steerable_provenance.json").read_text())["producers"]
    assert producers["interjection"] == "operator" and producers["task_aug"] == "operator"
    for style in ("subtask", "plan", "memory", "tool_call"):
        assert producers[style] == "steerable run: scripted planner (test double)", producers


def test_a_yaml_config_sets_the_session_and_flags_given_too_win(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    commands = tmp_path / "cmds.txt"
    commands.write_text("/task put the red cube in the left bin\n")
    config = tmp_path / "run.yaml"
    config.write_text(f"seed: 7\nhigh_level: none\ncommands: {commands}\nvlm:\n  request_timeout_s: 5\n")
    assert main(["run", "--config", str(config), "--high_level", "scripted"]) == 0
    out = capsys.readouterr().out
    assert "high level: scripted planner (test double)" in out and "done: task complete" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--eval_episode", "2"], "unknown option --eval_episode (did you mean --eval_episodes?)"),
        (["--vlm.base_ulr", "http://127.0.0.1:9/v1"], "unknown option --vlm.base_ulr (did you mean --vlm.base_url?)"),
        (["--polcy.path", "ckpt"], "(did you mean --policy.path?)"),
        (["--vlm.timeout_s", "0"], "--vlm.request_timeout_s: Input should be greater than 0"),  # one setting, two names
        (["--display", "tv"], "--display: Input should be 'none' or 'rerun'"),
        (["--env", "moon"], "--env 'moon': choose one of sim"),
    ],
)
def test_bad_flags_are_one_line_naming_the_flag(argv: list[str], message: str,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", *argv]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], lines


def test_a_config_file_with_an_unknown_key_names_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "run.yaml"
    config.write_text("hihg_level: none\n")
    assert main(["run", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert f"{config}: unknown key hihg_level (did you mean high_level?)" in err and len(err.strip().splitlines()) == 1


def test_help_lists_every_flag_with_its_help() -> None:
    from steerable.cli.flags import iter_flags
    from steerable.runtime.settings import RunSettings

    helped = steerable("run", "--help")
    assert helped.returncode == 0, helped.stderr
    passed = {field: section for section, field in RunSettings.pass_through.items()}
    for name, _, _, doc in iter_flags(RunSettings):
        flag = f"{passed[name]}.KEY=VALUE" if name in passed else name  # another parser's flags (LeRobot's)
        assert f"\n  --{flag}" in helped.stdout and doc, name
    assert "--vlm.request_timeout_s=60.0 (or --vlm.timeout_s)" in helped.stdout  # annotate's VLMConfig
    assert "--config FILE.yaml" in helped.stdout
