"""The data are executable: a synthetic episode's recorded actions, replayed in the simulator from the
episode's own scene, reproduce its outcome, at every difficulty (`steerable run --replay`)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from annotate_helpers import steerable
from shared_data import shared_dataset
from steerable.cli.main import main
from steerable.dataset.frames import feature_matrix
from steerable.dataset.lerobot import LeRobotDataset
from steerable.synthetic import SimEnv, generate_synthetic, record_episode, simulate_episode
from steerable.synthetic.ground_truth import EpisodeTruth, read_ground_truth
from steerable.synthetic.replay import ReplayReport, open_replay, replay_episode, wilson_interval

LEVELS = ("easy", "realistic", "hard")
FPS = 15
# Per difficulty: episodes replayed in memory (the columns exactly as the generator stores them) and
# from the files of a small dataset.
IN_MEMORY, ON_DISK = 40, 6


@pytest.fixture(scope="module")
def datasets(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("replay")
    return {
        level: generate_synthetic(root / level, episodes=ON_DISK, cameras=("wrist",), seed=5, fps=FPS,
                                  difficulty=level, interjection_rate=0.5, camera_shapes="legacy")
        for level in LEVELS
    }


@pytest.mark.parametrize("level", LEVELS)
def test_replayed_actions_reproduce_the_recorded_successes(level: str) -> None:
    env = SimEnv(fps=FPS, cameras=())
    results, redirected = [], 0
    for ep in range(IN_MEMORY):
        _task, rec, truth = record_episode(11, ep, FPS, level, 0.5)
        results.append(replay_episode(env, truth, rec.action))
        redirected += bool(truth.interjections)
    report = ReplayReport(level, tuple(results))
    failures = "\n".join(r.why() for r in results if not r.reproduced)
    assert report.recorded_successes >= 0.9 * IN_MEMORY, "the expert should succeed nearly always"
    assert report.reproduction_rate is not None and report.reproduction_rate >= 0.99, failures
    assert all(r.reproduced for r in results), failures
    # The cubes end where the recording left them, within the expert's tracking noise.
    worst = max(results, key=lambda r: r.max_error)
    assert worst.max_error < 0.01, worst
    assert redirected >= 5, "episodes whose placement a person redirected are replayed too"


@pytest.mark.parametrize("level", LEVELS)
def test_a_dataset_replays_from_its_own_files(datasets: dict[str, Path], level: str) -> None:
    replay = open_replay(datasets[level])
    assert replay.episodes == list(range(ON_DISK))
    seen: list[int] = []
    report = replay.run(on_result=lambda r: seen.append(r.episode_index))
    assert seen == list(range(ON_DISK))
    assert report.recorded_successes == ON_DISK and report.reproduction_rate == 1.0, report.lines()
    assert {r.difficulty for r in report.results} == {level}
    # The stored column is the generator's action, bit for bit (what the in-memory test replays).
    stored = feature_matrix(LeRobotDataset(datasets[level]).read_episode(1, ["action"]), "action")
    assert np.array_equal(stored, record_episode(5, 1, FPS, level, 0.5)[1].action)


def test_an_outcome_the_actions_do_not_reach_is_reported_with_its_reason() -> None:
    env = SimEnv(fps=FPS, cameras=())
    _task, rec, truth = record_episode(11, 0, FPS, "realistic")
    cut = replay_episode(env, truth, rec.action[: len(rec.action) // 3])  # stops before the task is done
    assert cut.recorded_success and not cut.replayed_success and not cut.reproduced
    assert not all(cut.steps) and cut.max_error > 0.01
    why = cut.why()
    assert why.startswith("episode 0 (realistic, ") and "recorded success, replayed failure" in why
    assert "not done" in why and "mm from the recording" in why
    report = ReplayReport("cut", (cut,))
    assert report.reproduction_rate == 0.0 and report.to_json()["outcomes_reproduced"] == 0
    assert report.lines()[-1] == why


def test_the_rebuilt_scene_is_the_generators() -> None:
    env = SimEnv(fps=FPS, cameras=())
    for level in LEVELS:
        for ep in (0, 3):
            task, demo = simulate_episode(2, ep, FPS, level)
            episode = env.reset_to_recorded(2, ep, level)
            assert env.world is not None and episode.task == task.text and episode.steps == task.steps
            assert env.world.scene == demo.states[0].scene
            assert env.world.positions == demo.states[0].positions  # the first frame moved only the gripper
            assert env.success() is False


def test_the_ground_truth_stores_the_scene_and_the_outcome(datasets: dict[str, Path]) -> None:
    doc = json.loads((datasets["hard"] / "meta" / "steerable_ground_truth.json").read_text())
    first = doc["episodes"][0]
    assert first["scene"] == {"seed": 5, "episode": 0, "difficulty": "hard"}
    assert first["outcome"]["success"] is True and set(first["outcome"]["cubes"]) <= {
        f"{c} cube" for c in ("red", "green", "orange", "purple", "pink", "cyan")
    }
    truths = read_ground_truth(datasets["hard"])
    again = EpisodeTruth.from_dict(truths[2].to_dict())
    assert again.scene == truths[2].scene and again.outcome == truths[2].outcome


def test_replay_through_the_cli_prints_every_episode_and_the_rate(datasets: dict[str, Path]) -> None:
    result = steerable("run", "--replay", str(datasets["realistic"]), "--episodes", "0-2,4", "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert [e["episode_index"] for e in data["episodes"]] == [0, 1, 2, 4]
    assert data["recorded_successes"] == 4 and data["reproduced_successes"] == 4
    assert data["reproduction_rate"] == 1.0
    first = data["episodes"][0]
    assert first["recorded_success"] is True and first["replayed_success"] is True and first["reproduced"]
    assert first["steps"] and all(first["steps"])
    assert first["cube_errors_m"] and max(first["cube_errors_m"].values()) < 0.01
    assert "replay: episodes 4/4" in result.stderr  # the progress line, never on stdout
    table = steerable("run", "--replay", str(datasets["easy"]), "--episodes", "3")
    assert table.returncode == 0, table.stderr
    assert "1 of 1 recorded successes reproduced (100.0%" in table.stdout
    row = table.stdout.splitlines()[1].split()
    assert row[0] == "3" and row[2:4] == ["success", "success"]


def test_a_dataset_that_cannot_be_replayed_is_one_line_with_status_2(
    datasets: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A dataset made before the scene was stored: its truth has no `scene` / `outcome`.
    old = tmp_path / "old"
    generate_synthetic(old, episodes=1, cameras=("wrist",), camera_shapes="legacy")
    path = old / "meta" / "steerable_ground_truth.json"
    doc = json.loads(path.read_text())
    for episode in doc["episodes"]:
        episode.pop("scene"), episode.pop("outcome")
    path.write_text(json.dumps(doc))
    cases = [
        (["--replay", str(shared_dataset("so101_record_test"))], "not a synthetic dataset"),
        (["--replay", str(old)], "records no scene to replay from (made before replay existed, or by "
                                 "`steerable run --record`): regenerate it with `steerable make-dataset synthetic`"),
        (["--replay", str(datasets["easy"]), "--episodes", "9"], "episode 9 is not in"),
        (["--replay", str(datasets["easy"]), "--eval_episodes", "2"], "does not combine with --eval_episodes"),
        (["--episodes", "0-2"], "--episodes picks the episodes of --replay DATASET"),
        (["--replay", str(datasets["easy"]), "--episodes", "3-1"], "--episodes takes episode indices"),
    ]
    for args, message in cases:
        assert main(["run", *args]) == 2, args
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err, (args, err)
        assert len(err.strip().splitlines()) == 1, err


def test_wilson_interval() -> None:
    low, high = wilson_interval(50, 50)
    assert high == 1.0 and 0.92 < low < 0.93
    assert wilson_interval(0, 0) == (0.0, 1.0)
    low, high = wilson_interval(25, 50)
    assert low < 0.5 < high and abs((low + high) / 2 - 0.5) < 1e-9
