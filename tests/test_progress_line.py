"""`steerable.progress.ProgressLine`: what a user sees of a long threaded job, in a pipe and on a terminal."""

from __future__ import annotations

import io
import os
import select
import threading
import time

from steerable.progress import ProgressLine, eta_seconds, format_eta


def test_in_a_pipe_a_plain_line_comes_periodically_and_at_the_end() -> None:
    out = io.StringIO()
    with ProgressLine("job", 4, stream=out, every_s=0.05) as bar:
        bar.advance()
        time.sleep(0.3)  # several periods
        workers = [threading.Thread(target=bar.advance) for _ in range(3)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
    lines = out.getvalue().splitlines()
    assert len(lines) >= 3
    assert lines[0].startswith("job: episodes 1/4,") and "ETA " in lines[0] and "ETA -" not in lines[0]
    assert lines[-1].startswith("job: episodes 4/4,") and lines[-1].endswith("ETA -")


def test_on_a_terminal_the_line_is_redrawn_in_place() -> None:
    leader, follower = os.openpty()
    with os.fdopen(follower, "w") as tty:
        with ProgressLine("job", 2, stream=tty, unit="clips") as bar:
            assert bar.live and not bar.lines
            bar.advance(2)
        tty.flush()
        shown = _read_all(leader)
    os.close(leader)
    assert "job: clips 2/2" in shown


def _read_all(fd: int) -> str:
    """What the terminal received: read until nothing more arrives for a moment (the line comes in pieces)."""
    chunks = []
    while select.select([fd], [], [], 0.5)[0]:
        chunks.append(os.read(fd, 65536))
    return b"".join(chunks).decode(errors="replace")


def test_eta() -> None:
    assert eta_seconds(2, 10, 4.0) == 16.0
    assert eta_seconds(0, 10, 4.0) is None and eta_seconds(10, 10, 4.0) is None
    assert format_eta(16.2) == "16 s" and format_eta(None) == "-"
    assert not ProgressLine("job", 1, stream=io.StringIO(), enabled=False).lines
