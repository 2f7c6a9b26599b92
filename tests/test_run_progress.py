"""Long jobs say how far they are: `run --eval_episodes` and `make-dataset` show episodes done / N (and
the evaluation its successes so far) with an ETA, on stderr: live on a terminal, plain lines in a pipe."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from annotate_helpers import REPO, steerable
from steerable.runtime.evaluation import EpisodeResult, evaluate
from steerable.runtime.report import EvalProgress
from steerable.runtime.stack import StackSpec


def test_eval_in_a_pipe_ends_with_a_progress_line_and_json_stays_one_object() -> None:
    result = steerable("run", "--env", "sim", "--eval_episodes", "3", "--workers", "1", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["episodes"] == 3  # stdout: exactly one JSON object
    lines = [line for line in result.stderr.splitlines() if line.startswith("eval: ")]
    assert lines, result.stderr
    assert lines[-1].startswith("eval: episodes 3/3, 3 succeeded,") and "ETA" in lines[-1], lines


def test_eval_progress_comes_periodically_with_the_successes_so_far() -> None:
    out = io.StringIO()
    with EvalProgress(4, stream=out, every_s=0.05) as progress:

        def slowly(result: EpisodeResult) -> None:  # scripted episodes take milliseconds; a policy's, minutes
            progress.on_result(result)
            time.sleep(0.15)

        report = evaluate(StackSpec(), 4, workers=1, on_result=slowly)
    lines = out.getvalue().splitlines()
    assert len(lines) >= 2, lines
    first = lines[0]
    assert first.startswith("eval: episodes ") and " succeeded, " in first and "ETA" in first
    assert lines[-1].startswith(f"eval: episodes 4/4, {sum(e.success for e in report.episodes)} succeeded,")


def test_eval_progress_is_a_live_line_on_a_terminal() -> None:
    leader, follower = os.openpty()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "steerable.cli.main", "run", "--env", "sim", "--eval_episodes", "2",
             "--workers", "1", "--json"],
            stdout=subprocess.PIPE, stderr=follower, text=True, cwd=REPO, timeout=300,
        )
        os.close(follower)
        follower = -1
        shown = b""
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:
                break
            if not chunk:
                break
            shown += chunk
    finally:
        if follower >= 0:
            os.close(follower)
        os.close(leader)
    assert done.returncode == 0
    assert json.loads(done.stdout)["episodes"] == 2
    assert "eval: episodes 2/2, 2 succeeded" in shown.decode(errors="replace")


def test_make_dataset_shows_its_progress(tmp_path: Path) -> None:
    result = steerable("make-dataset", "synthetic", "--out", str(tmp_path / "ds"), "--episodes", "2",
                       "--cameras", "top", "--difficulty", "easy")
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("make-dataset: ")]
    assert lines and lines[-1].startswith("make-dataset: episodes 2/2,") and "ETA" in lines[-1], result.stderr


def test_train_in_a_pipe_prints_plain_progress_lines(tmp_path: Path) -> None:
    """Not tqdm's bar redrawn with carriage returns (one endless line in a log): whole lines."""
    from policy_helpers import TINY_FLAGS

    made = steerable("make-dataset", "synthetic", "--out", str(tmp_path / "ds"), "--episodes", "2",
                     "--cameras", "top", "--difficulty", "easy", "--with_language")
    assert made.returncode == 0, made.stderr
    result = steerable("train", "--dataset", str(tmp_path / "ds"), "--output_dir", str(tmp_path / "run"),
                       "--batch_size", "2", "--steps", "3", "--eval_every", "3", *TINY_FLAGS)
    assert result.returncode == 0, result.stderr
    assert "\r" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("train: ")]
    assert lines and lines[-1].startswith("train: steps 3/3, loss ") and "ETA" in lines[-1], result.stderr
