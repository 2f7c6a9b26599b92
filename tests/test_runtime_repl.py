"""Drive the interactive REPL in a real terminal (tmux) as a person would, reading the screen."""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
import uuid
from io import StringIO
from pathlib import Path

from rich.console import Console

from annotate_helpers import REPO, steerable
from runtime_helpers import recorded_language
from steerable.runtime.repl import StatusView
from steerable.runtime.session import Session, SessionOptions

# A private tmux server: other tmux users on the machine cannot change the window size under us.
SOCKET = f"steerable-test-{uuid.uuid4().hex[:8]}"


def _tmux(*args: str) -> str:
    return subprocess.run(["tmux", "-L", SOCKET, *args], capture_output=True, text=True, check=True).stdout


def _wait_for(session: str, text: str, timeout: float = 60.0) -> str:
    """Poll the screen for `text`; generous for a loaded machine (2 cores shared with other tests)."""
    deadline = time.monotonic() + timeout
    screen = ""
    while time.monotonic() < deadline:
        screen = _tmux("capture-pane", "-p", "-t", session)
        if text in screen:
            return screen
        time.sleep(0.2)
    raise AssertionError(f"{text!r} never appeared on the screen:\n{screen}")


def test_repl_in_a_terminal(tmp_path: Path) -> None:
    assert shutil.which("tmux"), "tmux is missing: apt-get install -y tmux (make test does)"
    record = tmp_path / "rec"
    done = tmp_path / "exit_code"
    cmd = [sys.executable, "-m", "steerable.cli.main", "run", "--env", "sim", "--seed", "7", "--record", str(record)]
    shell = f"cd {shlex.quote(str(REPO))} && {shlex.join(cmd)}; echo $? > {shlex.quote(str(done))}; sleep 60"
    name = f"steerable-{uuid.uuid4().hex[:8]}"
    _tmux("new-session", "-d", "-s", name, "-x", "120", "-y", "40", shell)
    try:
        screen = _wait_for(name, "steerable run · sim · paused")
        assert "(not set)" in screen and "scripted planner (test double)" in screen
        _tmux("send-keys", "-t", name, "oops, not this", "C-w", "C-u", "/dance", "Enter")  # Ctrl-W, Ctrl-U edit
        _wait_for(name, "unknown command /dance")
        _tmux("send-keys", "-t", name, "/task put the red cube in the left bin", "Enter")
        screen = _wait_for(name, "subtask      pick up the red cube")
        assert "steerable run · sim · action" in screen and "2. place the red cube in the blue bin" in screen
        _tmux("send-keys", "-t", name, "no, the right bin", "Enter")
        screen = _wait_for(name, "say: OK, I will put the red cube in the yellow bin instead.")
        assert "interjection: no, the right bin" in screen
        _tmux("send-keys", "-t", name, "/pause", "Enter")
        _wait_for(name, "steerable run · sim · paused")
        _tmux("send-keys", "-t", name, "/resume", "Enter")
        _wait_for(name, "memory       The red cube is in the yellow bin.", timeout=90)
        _tmux("send-keys", "-t", name, "/ask where is the red cube?", "Enter")
        _wait_for(name, "answer: The red cube is in the yellow bin.")
        _tmux("send-keys", "-t", name, "/quit", "Enter")
        screen = _wait_for(name, "recorded:")
        assert "final (task done): The red cube is in the yellow bin." in screen
        deadline = time.monotonic() + 20
        while not done.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert done.read_text().strip() == "0"
    finally:
        subprocess.run(["tmux", "-L", SOCKET, "kill-session", "-t", name], capture_output=True)
    persistent, events, problems = recorded_language(record)
    assert problems == []
    assert any(r.get("style") == "interjection" for rows in events.values() for r in rows)


def test_ctrl_c_in_the_repl_stops_the_robot_and_keeps_the_recording(tmp_path: Path) -> None:
    record = tmp_path / "rec"
    done = tmp_path / "exit_code"
    cmd = [sys.executable, "-m", "steerable.cli.main", "run", "--seed", "7", "--record", str(record),
           "--task", "put the red cube in the left bin"]
    shell = f"cd {shlex.quote(str(REPO))} && {shlex.join(cmd)}; echo $? > {shlex.quote(str(done))}; sleep 60"
    name = f"steerable-{uuid.uuid4().hex[:8]}"
    _tmux("new-session", "-d", "-s", name, "-x", "120", "-y", "40", shell)
    try:
        _wait_for(name, "subtask      pick up the red cube")
        _tmux("send-keys", "-t", name, "C-c")
        screen = _wait_for(name, "recorded:")
        assert "interrupted: robot stopped" in screen
        deadline = time.monotonic() + 20
        while not done.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert done.read_text().strip() == "130"
    finally:
        subprocess.run(["tmux", "-L", SOCKET, "kill-session", "-t", name], capture_output=True)
    _, _, problems = recorded_language(record)
    assert problems == []


def test_a_full_event_log_shows_the_newest_events_and_the_prompt_in_a_small_terminal() -> None:
    console = Console(file=StringIO(), width=60, height=24, force_terminal=True)
    view = StatusView(Session(SessionOptions(seed=7), out=lambda _: None), console)
    for i in range(12):  # long lines wrap: 12 events take more rows than the terminal has left
        view.note(f"event {i:02d}: " + "a long line that wraps in a narrow terminal " * 2)
    view.typed = "/ask where"
    lines = console.render_lines(view, console.options)
    screen = "\n".join("".join(seg.text for seg in line) for line in lines)
    assert len(lines) <= 24, screen
    assert "event 11" in screen and "event 00" not in screen, screen
    assert screen.rstrip().endswith("> /ask where"), screen


def test_a_second_ctrl_c_while_the_recording_closes_does_not_lose_it(tmp_path: Path, capfd) -> None:
    record = tmp_path / "rec"
    session = Session(SessionOptions(task="put the red cube in the left bin", seed=7, record=record))
    session.runtime.run(max_ticks=20)
    recorder = session.recorder
    assert recorder is not None
    finish = recorder.close

    def close_after_ctrl_c() -> Path | None:
        os.kill(os.getpid(), signal.SIGINT)  # the operator presses Ctrl-C again while the videos are written
        time.sleep(0.05)
        return finish()

    recorder.close = close_after_ctrl_c  # type: ignore[method-assign]
    assert session.close() == record
    assert "still closing the recording" in capfd.readouterr().err
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert "1 episodes, 20 frames" in steerable("info", str(record)).stdout


def test_the_panel_shows_the_scene_of_the_last_reset() -> None:
    """`/reset 3` draws a new scene: the panel names it, not the scene the session started in."""
    console = Console(file=StringIO(), width=200, height=40, force_terminal=True)
    session = Session(SessionOptions(seed=7), out=lambda _: None)
    view = StatusView(session, console)

    def screen() -> str:
        return "\n".join("".join(seg.text for seg in line) for line in console.render_lines(view, console.options))

    assert "(seed 7): " in screen()
    session.reset("3")
    assert f"scene        (seed 3): {session.env.describe_scene()}" in screen()
    assert "seed 7" not in screen()
