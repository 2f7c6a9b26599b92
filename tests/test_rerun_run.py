"""`steerable run --display rerun`: the live session streamed to Rerun, read back from an .rrd."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import rerun as rr  # the [rerun] extra (in the test extra)

from annotate_helpers import steerable
from steerable.cli.main import main


@pytest.fixture(scope="module")
def run_rrd(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    folder = tmp_path_factory.mktemp("rerun-run")
    commands = folder / "cmds.txt"
    commands.write_text("/task put the red cube in the left bin\n@2.5s no, the right bin\n"
                        "/ask where is the red cube?\n")
    out = folder / "run.rrd"
    done = steerable("run", "--env", "sim", "--seed", "7", "--commands", str(commands),
                     "--display", "rerun", "--display_to", str(out))
    assert done.returncode == 0, done.stderr
    return out, done.stdout


def frames(path: Path, contents: str) -> list[dict[str, Any]]:
    reader = rr.chunk.RrdReader(path)
    (entry,) = reader.recordings()
    table = reader.store(store=entry).stream().collect().reader(index="frame_index", contents=contents)
    return [{k: v for k, v in row.items() if v is not None} for row in table.to_arrow_table().to_pylist()]


def texts(rows: list[dict[str, Any]], column: str) -> list[tuple[int, str]]:
    return [(r["frame_index"], r[column][0]) for r in rows if column in r]


def test_live_language_context_and_events(run_rrd: tuple[Path, str]) -> None:
    path, stdout = run_rrd
    rows = frames(path, "/language/**")
    assert texts(rows, "/language/task:TextDocument:text") == [(0, "put the red cube in the left bin")]
    subtasks = [t for _, t in texts(rows, "/language/subtask:TextDocument:text")]
    assert subtasks[:3] == ["pick up the red cube", "place the red cube in the blue bin",
                            "place the red cube in the yellow bin"]
    (interjection,) = texts(rows, "/language/interjection:TextLog:text")
    (speech,) = texts(rows, "/language/speech:TextLog:text")
    assert interjection[1] == "no, the right bin"
    assert speech == (interjection[0], "OK, I will put the red cube in the yellow bin instead.")
    # the interjection arrives at 2.5 s of loop time: tick 38 at 15 Hz (as the printed log says)
    assert interjection[0] == 38 and "[   2.5s] interjection: no, the right bin" in stdout
    assert texts(rows, "/language/answer:TextLog:text")[-1][1] == "The red cube is in the yellow bin."
    memory = texts(rows, "/language/memory:TextDocument:text")
    assert memory[-1][1] == "The red cube is in the yellow bin."


def test_a_cleared_subtask_ends_its_state_lane(run_rrd: tuple[Path, str]) -> None:
    rows = frames(run_rrd[0], "/language/subtask")
    cleared = [r for r in rows if r.get("/language/subtask:TextDocument:text") == [""]]
    assert cleared, "the task ends with the subtask cleared"
    for row in cleared:  # an empty state, not the previous subtask's lane running on
        assert row.get("/language/subtask:StateChange:state") == [], row


def test_cameras_state_action_and_rates_every_tick(run_rrd: tuple[Path, str]) -> None:
    path, _ = run_rrd
    cams = frames(path, "/cameras/**")
    assert len(cams) > 60 and all("/cameras/top:Image:buffer" in r and "/cameras/wrist:Image:buffer" in r
                                  for r in cams)
    fmt = cams[0]["/cameras/top:Image:format"][0]
    assert (fmt["width"], fmt["height"]) == (224, 160)
    plots = frames(path, "/plots/**")
    assert [r["frame_index"] for r in plots] == [r["frame_index"] for r in cams]
    state = np.asarray([r["/plots/state:Scalars:scalars"] for r in plots])
    assert state.shape == (len(plots), 4) and np.ptp(state[:, 0]) > 0.01  # the arm moved
    rates = frames(path, "/runtime/rates/**")
    key = "/runtime/rates/ctrl_hz:Scalars:scalars"
    ctrl = [r[key][0] for r in rates if key in r]
    assert len(ctrl) >= 4 and abs(ctrl[-1] - 15.0) < 0.5
    log = texts(frames(path, "/runtime/log"), "/runtime/log:TextLog:text")
    assert any(text == "done: task complete" for _, text in log)


def test_display_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cases = [
        (["--display", "rerun", "--display_to", "out.txt"], "--display_to takes a viewer URL"),
        (["--display", "rerun", "--eval_episodes", "2"], "--display shows one session"),
        (["--display_to", str(tmp_path / "x.rrd")], "add --display rerun"),
        (["--display", "rerun", "--display_to", str(tmp_path / "no" / "x.rrd")], "its folder does not exist"),
        (["--display", "rerun", "--display_to", "rerun+http://127.0.0.1:9/proxy"], "no Rerun viewer answers"),
    ]
    for args, message in cases:
        assert main(["run", "--env", "sim", "--task", "put the red cube in the left bin", *args]) == 2, args
        err = capsys.readouterr().err
        assert message in err and len(err.strip().splitlines()) == 1, err


def test_spawning_without_a_display_is_one_line(monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    started = time.monotonic()
    assert main(["run", "--env", "sim", "--task", "put the red cube in the left bin", "--display", "rerun"]) == 2
    err = capsys.readouterr().err
    assert "needs a display" in err and "--display_to FILE.rrd" in err and len(err.strip().splitlines()) == 1, err
    assert time.monotonic() - started < 10  # not the SDK's connection retries


def test_without_rerun_sdk_the_flag_names_the_extra(tmp_path: Path) -> None:
    blocked = tmp_path / "blocked" / "rerun"
    blocked.mkdir(parents=True)
    (blocked / "__init__.py").write_text("raise ImportError('rerun-sdk is not installed here')\n")
    env = {**os.environ, "PYTHONPATH": f"{blocked.parent}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    done = subprocess.run(
        [sys.executable, "-m", "steerable.cli.main", "run", "--task", "put the red cube in the left bin",
         "--display", "rerun", "--display_to", str(tmp_path / "x.rrd")],
        capture_output=True, text=True, env=env, timeout=60, stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2, done.stderr
    assert "steerable[rerun]" in done.stderr and len(done.stderr.strip().splitlines()) == 1
