"""The learning-rate schedule and `steerable train --time_budget`: a run cut by its time still decays to the
schedule's floor, ends with a checkpoint, and a resumed run counts the time its checkpoint spent."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from policy_helpers import TINY_FLAGS, one_thread  # noqa: F401  (autouse fixture)
from steerable.policy.schedule import Schedule, lr_factor, parse_duration
from train_data import annotate_synthetic

ENV_FLAGS = ("--batch_size", "4", "--no_progress", "--log_every", "1", "--warmup_steps", "0",
             "--eval_every", "100000", "--save_every", "100000")


@pytest.mark.parametrize(("text", "seconds"), [(90, 90.0), ("90", 90.0), ("90s", 90.0), ("20m", 1200.0),
                                               ("1.5h", 5400.0), (" 2 min ", 120.0), (None, None), ("", None)])
def test_durations_read_as_seconds(text: object, seconds: float | None) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["abc", "5d", "-3", "0", "1e999", True])
def test_a_bad_duration_is_refused(text: object) -> None:
    with pytest.raises(ValueError, match="duration"):
        parse_duration(text)


def test_by_steps_the_schedule_is_the_cosine_it_always_was() -> None:
    """Without a time budget: warm-up, then cosine to a tenth of the peak at --steps (what runs trained with)."""
    schedule = Schedule(steps=1000, warmup=100)
    assert schedule.factor(0) == pytest.approx(0.01) and schedule.factor(99) == pytest.approx(1.0)
    assert schedule.factor(100) == pytest.approx(1.0) and schedule.factor(1000) == pytest.approx(0.1)
    assert schedule.factor(550) == pytest.approx(0.1 + 0.9 * 0.5)
    assert not schedule.over(999) and schedule.over(1000)
    schedule.seen(1e9)  # time alone does not end a run without a budget
    assert not schedule.over(10) and schedule.factor(550) == pytest.approx(0.55)


def test_under_a_time_budget_the_larger_share_spent_decays_and_ends_the_run() -> None:
    schedule = Schedule(steps=1000, warmup=0, budget_s=60.0, spent_s=15.0)
    assert schedule.spent == 15.0 and schedule.progress(0) == pytest.approx(0.25)
    assert schedule.factor(0) == pytest.approx(lr_factor(0, 0, 0.25))
    schedule.seen(30.0)
    assert schedule.factor(0) == pytest.approx(0.1 + 0.9 * 0.5) and not schedule.over(1)
    assert schedule.progress(900) == pytest.approx(0.9)  # the steps, when they are ahead of the time
    schedule.seen(60.0)
    assert schedule.over(1) and schedule.factor(1) == pytest.approx(0.1)
    assert schedule.elapsed() >= 15.0


def test_a_clock_is_wall_or_cpu() -> None:
    assert Schedule(10, 0, 5.0, "cpu").elapsed() >= 0
    with pytest.raises(ValueError, match="wall or cpu"):
        Schedule(10, 0, 5.0, "gpu")


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("schedule") / "ds"
    annotate_synthetic(root, episodes=3)
    return root


def _train(dataset: Path, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "steerable.cli.main", "train", "--dataset", str(dataset), "--output_dir", str(out),
           *ENV_FLAGS, *TINY_FLAGS, *extra]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def test_a_run_ends_at_its_time_budget_decayed_and_saved(dataset: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    first = _train(dataset, out, "--steps", "100000", "--time_budget", "4s", "--lr", "0.001")
    assert first.returncode == 0, first.stderr
    assert "--time_budget 4 s (wall) ended it before --steps 100000" in first.stdout
    steps = int(first.stdout.split("trained ")[1].split(" steps")[0])
    assert 1 <= steps < 100000
    lrs = [r["lr"] for r in map(json.loads, (out / "logs.jsonl").read_text().splitlines()) if "lr" in r]
    assert len(lrs) == steps and lrs[-1] == pytest.approx(1e-4)  # the floor: a tenth of the peak
    assert all(b <= a + 1e-12 for a, b in zip(lrs, lrs[1:], strict=False))  # it decays with the time spent
    state = json.loads((out / "checkpoints" / f"step_{steps:08d}" / "trainer_state.json").read_text())
    assert 4.0 <= state["time_spent_s"] < 60
    # Resumed with the same budget: its time is spent, so nothing more is trained.
    again = _train(dataset, out, "--steps", "100000", "--time_budget", "4s")
    assert again.returncode == 0, again.stderr
    assert f"trained {steps} steps" in again.stdout and "resumed from" in again.stdout


def test_steps_end_a_run_before_a_budget_that_is_not_spent(dataset: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = _train(dataset, out, "--steps", "3", "--time_budget", "1h", "--time_clock", "cpu")
    assert result.returncode == 0, result.stderr
    assert "trained 3 steps" in result.stdout and "time_budget" not in result.stdout
    lrs = [r["lr"] for r in map(json.loads, (out / "logs.jsonl").read_text().splitlines()) if "lr" in r]
    assert lrs[0] == pytest.approx(1e-3) and not math.isclose(lrs[-1], 1e-4)


def test_a_bad_budget_is_one_line_and_exit_2(dataset: Path, tmp_path: Path) -> None:
    result = _train(dataset, tmp_path / "run", "--time_budget", "soon")
    assert result.returncode == 2 and "--time_budget" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_the_progress_line_counts_down_the_time_budget() -> None:
    from steerable.policy.trainer import _StepLines

    assert Schedule(10, 0).sooner_end(5.0) == 5.0 and Schedule(10, 0).sooner_end(None) is None
    schedule = Schedule(steps=100000, warmup=0, budget_s=60.0)
    assert schedule.sooner_end(None) == 60.0 and schedule.sooner_end(5.0) == 5.0
    # So many steps that the step-rate ETA (at least 10**12 x 1 us, the clamp) is always the later end: with
    # 100,000 steps a call within 0.1 ms of the line's start gave a step ETA under the budget's 10 s.
    line = _StepLines(10**12, 0, schedule)
    try:
        line.update(1)
        schedule.seen(50.0)
        assert line.text().endswith("ETA 10 s"), line.text()
    finally:
        line.close()
