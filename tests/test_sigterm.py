"""Stopping a command that starts processes stops all of them: `kill -TERM`, Ctrl-C and `kill -KILL`
of `steerable run --eval_episodes` (its pool workers), of `steerable annotate --executor.backend ray`
(the local Ray cluster it starts) and of `steerable annotate --vlm.backend vllm` (its replicas).

Each command runs in its own session, as from a shell; a poller records every process of its tree
(by PPID, process group and session, see `process_helpers.TreeRecorder`) while it runs, and after
the signal none of them may be left within 5 s. A SIGTERM ends the command with status 143 and one
line on stderr.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from annotate_helpers import REPO, make_synthetic
from process_helpers import TreeRecorder, alive, describe, free_port
from steerable.testing.server import TestServer
from steerable.testing.server.plausible import plausible_responder

# The files that start a Ray cluster share one worker of `make test` (tests/conftest.py).
pytestmark = pytest.mark.xdist_group("ray")

STOP_WITHIN_S = 5.0

# `vllm serve MODEL ... --port P`: the test server, answering each request after FAKE_LATENCY_S.
FAKE_VLLM = textwrap.dedent(
    """\
    #!{python}
    import os, sys
    args = sys.argv[1:]
    port = args[args.index("--port") + 1]
    os.execv(sys.executable, [sys.executable, "-m", "steerable.testing.server", "--port", port, "--model", args[1],
                              "--responder", "plausible", "--latency", "1.0"])
    """
)


@dataclass
class Command:
    proc: subprocess.Popen[str]
    tree: TreeRecorder
    stderr_path: Path
    signalled_at: int = 0  # how much stderr there was when the signal was sent

    @property
    def stderr(self) -> str:
        return self.stderr_path.read_text()

    @property
    def stderr_after_signal(self) -> str:
        return self.stderr[self.signalled_at :]

    def stop(self, sig: signal.Signals, *, group: bool = False) -> tuple[int | None, list[tuple[int, int]]]:
        """Send `sig` (to the whole process group when `group`, as a terminal's Ctrl-C does); the exit
        status (None: still running) and the processes of the tree left after STOP_WITHIN_S."""
        self.signalled_at = len(self.stderr)
        sent = time.monotonic()
        if group:
            os.killpg(self.proc.pid, sig)
        else:
            os.kill(self.proc.pid, sig)
        try:
            code: int | None = self.proc.wait(timeout=STOP_WITHIN_S)
        except subprocess.TimeoutExpired:
            code = None
        return code, self.tree.left(within_s=max(0.0, STOP_WITHIN_S - (time.monotonic() - sent)))


@pytest.fixture
def start(tmp_path: Path) -> Iterator[object]:
    """`start(*args, env=...)`: the real CLI in its own session, its tree recorded; whatever is left
    at the end of the test is killed."""
    started: list[Command] = []

    def _start(*args: str, env: dict[str, str] | None = None) -> Command:
        out = (tmp_path / f"cmd{len(started)}.out").open("w")
        err_path = tmp_path / f"cmd{len(started)}.err"
        proc = subprocess.Popen(
            [sys.executable, "-m", "steerable.cli.main", *args],
            stdin=subprocess.DEVNULL, stdout=out, stderr=err_path.open("w"), text=True, cwd=REPO,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}, start_new_session=True,
        )
        command = Command(proc, TreeRecorder(proc.pid).__enter__(), err_path)
        started.append(command)
        return command

    yield _start
    for command in started:
        command.tree.stop()
        for pid, _ in alive(command.tree.seen):
            os.kill(pid, signal.SIGKILL)
        if command.proc.poll() is None:
            command.proc.kill()
            command.proc.wait()


def _assert_terminated(command: Command) -> None:
    """SIGTERM: nothing of the tree left within 5 s, exit 143, one line on stderr."""
    code, left = command.stop(signal.SIGTERM)
    assert not left, f"left running after SIGTERM:\n{describe(left)}"
    assert code == 128 + signal.SIGTERM, command.stderr[-3000:]
    said = command.stderr_after_signal
    assert said.strip().splitlines() == ["steerable: terminated (SIGTERM)"], said[-3000:]


# -- the evaluation pool ---------------------------------------------------------------------------

# Long episodes (a minute of CPU each: a fast control rate, a long limit), as a slow policy's are.
EVAL = ("run", "--eval_episodes", "4", "--workers", "2", "--ctrl_hz", "100000", "--max_seconds", "3600")


@pytest.mark.timeout(120)
def test_sigterm_of_the_eval_ends_its_workers(start: object) -> None:
    command = start(*EVAL)  # type: ignore[operator]
    assert len(command.tree.wait_for(2, timeout_s=60)) == 2, command.stderr
    _assert_terminated(command)


@pytest.mark.timeout(120)
def test_ctrl_c_of_the_eval_ends_its_workers_with_one_line(start: object) -> None:
    command = start(*EVAL)  # type: ignore[operator]
    assert len(command.tree.wait_for(2, timeout_s=60)) == 2, command.stderr
    time.sleep(0.5)  # the workers are in episodes, not starting
    code, left = command.stop(signal.SIGINT, group=True)  # a terminal's Ctrl-C reaches the whole group
    assert not left, f"left running after Ctrl-C:\n{describe(left)}"
    assert code == 130
    said = command.stderr_after_signal  # not one `Process ForkPoolWorker-1:` traceback per worker
    assert said.strip().splitlines() == ["steerable: interrupted"], said[-3000:]


@pytest.mark.timeout(120)
def test_sigkill_of_the_eval_ends_its_workers(start: object) -> None:
    command = start(*EVAL)  # type: ignore[operator]
    assert len(command.tree.wait_for(2, timeout_s=60)) == 2, command.stderr
    code, left = command.stop(signal.SIGKILL)
    assert code == -signal.SIGKILL
    assert not left, f"workers outlived their SIGKILLed parent:\n{describe(left)}"


# -- the vLLM replicas of annotate -----------------------------------------------------------------

def _answers(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


@pytest.fixture
def fake_vllm_path(tmp_path: Path) -> str:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "vllm").write_text(FAKE_VLLM.format(python=sys.executable))
    (bin_dir / "vllm").chmod(0o755)
    return f"{bin_dir}{os.pathsep}{os.environ['PATH']}"


def _annotate_with_vllm(start: object, tmp_path: Path, fake_vllm_path: str) -> Command:
    root = make_synthetic(tmp_path / "ds", episodes=3)
    port = free_port()
    command: Command = start(  # type: ignore[operator]
        "annotate", "--root", str(root), "--vlm.backend", "vllm", "--vlm.model_id", "tiny-vlm",
        "--vlm.serve_port", str(port), "--vlm.log_dir", str(tmp_path / "logs"), "--executor.progress", "false",
        env={"PATH": fake_vllm_path, "CUDA_VISIBLE_DEVICES": "0"},
    )
    deadline = time.monotonic() + 60
    while not _answers(port) and time.monotonic() < deadline and command.proc.poll() is None:
        time.sleep(0.1)
    assert _answers(port), command.stderr
    assert command.tree.wait_for(1, timeout_s=10, match="steerable.testing.server"), command.stderr
    time.sleep(1.0)  # the first episodes are waiting on the replica
    return command


@pytest.mark.timeout(120)
def test_sigterm_of_annotate_ends_its_vllm_replica(start: object, tmp_path: Path, fake_vllm_path: str) -> None:
    command = _annotate_with_vllm(start, tmp_path, fake_vllm_path)
    _assert_terminated(command)


@pytest.mark.timeout(120)
def test_sigkill_of_annotate_ends_its_vllm_replica(start: object, tmp_path: Path, fake_vllm_path: str) -> None:
    command = _annotate_with_vllm(start, tmp_path, fake_vllm_path)
    code, left = command.stop(signal.SIGKILL)
    assert code == -signal.SIGKILL
    assert not left, f"the replica outlived its SIGKILLed launcher:\n{describe(left)}"


# -- the Ray driver --------------------------------------------------------------------------------

@pytest.mark.timeout(240)
def test_sigterm_of_a_ray_run_ends_the_local_cluster(start: object, tmp_path: Path) -> None:
    root = make_synthetic(tmp_path / "ds", episodes=4)
    with TestServer(responder=plausible_responder, latency_s=1.0) as server:
        command: Command = start(  # type: ignore[operator]
            "annotate", "--root", str(root), "--vlm.base_url", server.url, "--vlm.model_id", "test-model",
            "--executor.backend", "ray", "--executor.workers", "1", "--executor.progress", "false",
        )
        deadline = time.monotonic() + 180
        while server.stats.chat_requests == 0 and time.monotonic() < deadline and command.proc.poll() is None:
            time.sleep(0.2)  # the actor is running episodes
        assert server.stats.chat_requests > 0, command.stderr[-3000:]
        assert command.tree.wait_for(1, timeout_s=5, match="raylet"), describe(command.tree.seen)
        _assert_terminated(command)
