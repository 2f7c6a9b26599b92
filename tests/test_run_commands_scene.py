"""Small things of `steerable run` (issue 34, item 14): a commands file whose line the scene cannot carry
out stops with exit status 2 naming the line (the docs' example runs on the default scene), and
`--policy.path CKPT/checkpoints/latest` (the pointer `steerable train` writes) is the checkpoint it names."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from annotate_helpers import REPO
from steerable.cli.main import main
from steerable.errors import ConfigError
from steerable.runtime.policy_server import ServePolicySettings
from steerable.runtime.settings import RunSettings


def test_the_commands_example_of_the_docs_runs_on_the_default_scene(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    docs = (REPO / "docs" / "run.md").read_text(encoding="utf-8")
    section = docs[docs.index("## `--commands FILE`"):]
    example = re.search(r"```\n(.*?)```", section, re.S)
    assert example is not None
    commands = tmp_path / "session.txt"
    commands.write_text(example.group(1))
    assert main(["run", "--commands", str(commands)]) == 0
    out = capsys.readouterr().out
    assert "scene (seed 0)" in out and "final (task done)" in out and "] !: " not in out, out


def test_a_commands_line_naming_an_object_the_scene_lacks_stops_the_run_naming_that_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    commands = tmp_path / "c.txt"
    commands.write_text("# seed 0 has no red cube\n/task put the red cube in the blue bin\n/ask where is it?\n")
    assert main(["run", "--commands", str(commands)]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith(f"steerable: error: {commands}:2: task 'put the red cube in the blue bin' names an "
                             "object this scene does not have ('put the red cube in the blue bin'); scene (seed 0): ")
    assert "question:" not in captured.out, "the run stopped at the line"
    # Piped lines are a commands file too; the same task where the scene has a red cube runs.
    monkeypatch.setattr("sys.stdin", io.StringIO("/task put the red cube in the blue bin\n"))
    assert main(["run"]) == 2
    assert "stdin:1: task 'put the red cube in the blue bin' names an object" in capsys.readouterr().err
    assert main(["run", "--seed", "7", "--commands", str(commands)]) == 0


def test_without_a_high_level_the_controller_refusing_the_task_stops_the_commands_file_too(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`--high_level none` sends the task to the controller as it is: its refusal is the line's mistake."""
    commands = tmp_path / "c.txt"
    commands.write_text("/task put the red cube in the blue bin\n")
    assert main(["run", "--high_level", "none", "--commands", str(commands), "--max_seconds", "5"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"steerable: error: {commands}:1: "), err
    assert "red cube" in err[0] and "scene (seed 0): " in err[0]
    assert main(["run", "--high_level", "none", "--seed", "7", "--commands", str(commands), "--max_seconds", "5"]) == 0
    capsys.readouterr()
    # Words the controller cannot read at all are the line's mistake as well (the REPL only warns).
    commands.write_text("/task pick up the red cube\n/task dance\n")
    assert main(["run", "--high_level", "none", "--seed", "7", "--commands", str(commands), "--max_seconds", "5"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"steerable: error: {commands}:2: cannot parse command 'dance'"), err


def _trained(tmp_path: Path) -> Path:
    """A training output folder as `steerable train` leaves it: two checkpoints, `latest` naming the newer."""
    out = tmp_path / "out"
    for step in (2, 4):
        folder = out / "checkpoints" / f"step_{step:08d}"
        folder.mkdir(parents=True)
        (folder / "config.json").write_text("{}")
        (folder / "model.safetensors").write_bytes(b"")
    (out / "checkpoints" / "latest").write_text("step_00000004\n")
    return out


def test_policy_path_takes_the_latest_pointer_as_the_checkpoint_it_names(tmp_path: Path) -> None:
    out = _trained(tmp_path)
    pointer = out / "checkpoints" / "latest"
    newest = out / "checkpoints" / "step_00000004"
    run = RunSettings(low_level="policy", policy={"path": str(pointer)})
    assert run.policy.path == str(newest) and run.stack().policy_path == str(newest)
    assert ServePolicySettings(policy={"path": str(pointer)}).checkpoint == str(newest)
    assert RunSettings(low_level="policy", policy={"path": str(out)}).policy.path == str(out)  # folders as given


def test_a_file_that_is_no_checkpoint_pointer_is_refused_in_one_line(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    out = _trained(tmp_path)
    pointer = out / "checkpoints" / "latest"
    pointer.write_text("step_00000009\n")  # pruned
    with pytest.raises(ConfigError, match=r"points at step_00000009, which is not in .*checkpoints"):
        RunSettings(low_level="policy", policy={"path": str(pointer)})
    weights = out / "checkpoints" / "step_00000004" / "model.safetensors"
    assert main(["run", "--low_level", "policy", "--policy.path", str(weights)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "is a file: pass a checkpoint folder, the training output folder, or its " \
        "checkpoints/latest" in err[0], err
