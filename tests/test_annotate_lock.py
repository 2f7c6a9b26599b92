"""Two `steerable annotate` runs on one dataset: the second is refused at its start, not at the commit."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from annotate_helpers import REPO, file_hashes, make_synthetic, steerable
from steerable.testing.server import TestServer
from steerable.testing.server.plausible import plausible_responder

MODEL = "test-model"


def _args(root: Path, url: str) -> list[str]:
    return [
        "annotate", "--root", str(root), "--vlm.base_url", url, "--vlm.model_id", MODEL,
        "--interjections.enabled", "false", "--vqa.enabled", "false", "--executor.progress", "false",
    ]


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    return make_synthetic(tmp_path / "ds", episodes=1)


def test_a_second_run_is_refused_while_the_first_writes_and_a_killed_one_blocks_nothing(dataset: Path) -> None:
    with (
        TestServer(responder=plausible_responder, model_ids=[MODEL], latency_s=60.0) as slow,
        TestServer(responder=plausible_responder, model_ids=[MODEL]) as fast,
    ):
        first = subprocess.Popen(
            [sys.executable, "-m", "steerable.cli.main", *_args(dataset, slow.url)],
            cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + 120
            while slow.stats.chat_requests == 0 and first.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)  # the first run is in flight once its first VLM call arrives
            assert first.poll() is None and slow.stats.chat_requests > 0
            before = file_hashes(dataset)

            second = steerable(*_args(dataset, fast.url))
            assert second.returncode == 2, second.stdout + second.stderr
            (line,) = second.stderr.strip().splitlines()
            assert f"pid {first.pid} on {socket.gethostname()}, started " in line and str(dataset) in line
            assert fast.stats.chat_requests == 0 and file_hashes(dataset) == before
            lock = json.loads((dataset / ".steerable" / "annotate.lock").read_text())
            assert lock["pid"] == first.pid
        finally:
            first.send_signal(signal.SIGKILL)
            first.wait()

        third = steerable(*_args(dataset, fast.url))  # the kernel dropped the killed run's lock
    assert third.returncode == 0, third.stdout + third.stderr
    assert "annotated 1/1" in third.stdout
    assert not (dataset / ".steerable" / "annotate.lock").exists()  # released at the end


def test_a_run_stopped_by_a_user_error_leaves_no_work_folder(dataset: Path) -> None:
    result = steerable("annotate", "--root", str(dataset), "--vlm.camera_key", "nope")
    assert result.returncode == 2 and "nope" in result.stderr
    assert not (dataset / ".steerable").exists()
