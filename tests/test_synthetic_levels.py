"""Difficulty levels of the synthetic tabletop: what each adds, and what stays true at every level."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from steerable.dataset import open_dataset
from steerable.errors import ConfigError
from steerable.synthetic import generate_synthetic, read_ground_truth, simulate_episode
from steerable.synthetic.commands import DIRECTIONS, parse_command
from steerable.synthetic.difficulty import HARD, REALISTIC, get_difficulty
from steerable.synthetic.expert import Demo
from steerable.synthetic.ground_truth import gripper_events
from steerable.synthetic.recording import record
from steerable.synthetic.tasks import PUSH_DISTANCE, TaskSpec
from steerable.synthetic.world import GRASP_THRESHOLD

FPS = 15
EPISODES = 24


def _episodes(level: str, seed: int = 5, rate: float = 0.0) -> list[tuple[TaskSpec, Demo]]:
    return [simulate_episode(seed, ep, FPS, level, rate) for ep in range(EPISODES)]


def _closures(demo: Demo) -> np.ndarray:
    return demo.observations()[:, 3]


def _stats(level: str) -> dict[str, float]:
    eps = _episodes(level)
    picks = sum(sum(not s.push for s in t.steps) for t, _ in eps)
    events = sum(len(gripper_events(_closures(d), np.arange(len(d.states)) / FPS)) for _, d in eps)
    return {
        "events_per_pick": events / picks,
        "pushes": sum(s.push for t, _ in eps for s in t.steps),
        "long_tasks": sum(len(t.steps) >= 3 for t, _ in eps),
        "seconds": sum(len(d.states) for _, d in eps) / FPS / len(eps),
    }


def test_levels_differ_measurably() -> None:
    easy, realistic, hard = (_stats(level) for level in ("easy", "realistic", "hard"))
    # Easy: one close and one open per pick-and-place; harder levels re-grasp after failed grasps.
    assert easy["events_per_pick"] == 2.0
    assert 2.0 < realistic["events_per_pick"] < hard["events_per_pick"]
    assert easy["pushes"] == 0 < realistic["pushes"] <= hard["pushes"]
    assert easy["long_tasks"] == 0 < realistic["long_tasks"] < hard["long_tasks"]
    assert easy["seconds"] < realistic["seconds"] < hard["seconds"]


def test_expert_completes_every_task_at_every_level() -> None:
    for level in ("easy", "realistic", "hard"):
        for task, demo in _episodes(level, seed=9, rate=0.5):
            first, final = demo.states[0], demo.states[-1]
            assert final.held is None
            for step in task.steps:
                i = final.scene.cube_index(step.cube)
                x, y, z = final.positions[i]
                if step.push:
                    ux, uy = DIRECTIONS[step.target]
                    moved = (x - first.positions[i][0]) * ux + (y - first.positions[i][1]) * uy
                    assert moved == pytest.approx(PUSH_DISTANCE, abs=0.01), f"{level}: {task.text}"
                elif step.stack:
                    tx, ty, tz = final.positions[final.scene.cube_index(step.final_target)]
                    assert abs(x - tx) < 0.01 and abs(y - ty) < 0.01 and z == pytest.approx(tz + 0.04)
                else:
                    x0, y0, x1, y1 = final.scene.receptacle(step.final_target).rect
                    assert x0 < x < x1 and y0 < y < y1 and z == 0.0, f"{level}: {task.text}"


def test_push_steps_have_no_gripper_event_and_every_subtask_is_a_command() -> None:
    seen_push = 0
    for _task, demo in _episodes("hard"):
        closed = _closures(demo) >= GRASP_THRESHOLD
        starts = [f for f, _ in demo.subtasks] + [len(demo.states)]
        for (start, text), end in zip(demo.subtasks, starts[1:], strict=True):
            command = parse_command(text)
            assert command is not None, f"{text!r} is not in the command grammar"
            if command.kind == "push":
                seen_push += 1
                assert not closed[start:end].any(), f"{text!r} closes the gripper"
    assert seen_push > 0


def test_recording_drops_frames_stalls_and_adds_noise_but_keeps_regular_time() -> None:
    task, demo = simulate_episode(2, 0, FPS, "hard")
    rec = record(demo, HARD, np.random.default_rng(0), ["top", "wrist"], FPS)
    assert len(rec.ticks) < len(demo.states), "stalls lose ticks"
    assert (np.diff(rec.ticks) >= 1).all() and rec.ticks[0] == 0 and rec.ticks[-1] == len(demo.states) - 1
    noise = rec.state[:, :3] - demo.observations()[rec.ticks, :3]
    assert 0.002 < float(noise.std()) < 0.005
    frames = list(rec.frames("top"))
    repeats = sum(np.array_equal(a, b) for a, b in zip(frames, frames[1:], strict=False))
    assert repeats >= 1, "dropped frames repeat the previous image"
    assert len(frames) == len(rec.ticks) == len(rec.boxes("top"))
    easy = record(demo, get_difficulty("easy"), np.random.default_rng(0), ["top"], FPS)
    np.testing.assert_array_equal(easy.state, demo.observations())
    assert list(easy.ticks) == list(range(len(demo.states)))


@pytest.fixture(scope="module")
def realistic(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("levels") / "realistic"
    return generate_synthetic(root, episodes=3, cameras=("top",), seed=4, difficulty="realistic")


def test_realistic_dataset_is_valid_v3_with_true_spans(realistic: Path) -> None:
    ds = open_dataset(realistic)
    truth = read_ground_truth(realistic)
    for ep in ds.episodes:
        table = ds.read_episode(ep.episode_index, ["timestamp", "frame_index", "observation.state"])
        stamps = table.column("timestamp").to_pylist()
        expected = (np.arange(ep.length, dtype=np.float64) / FPS).astype(np.float32)
        np.testing.assert_array_equal(np.array(stamps, dtype=np.float32), expected)
        gt = truth[ep.episode_index]
        assert gt.subtasks[0].start == 0.0 and gt.subtasks[-1].end == stamps[-1]
        for a, b in zip(gt.subtasks, gt.subtasks[1:], strict=False):
            assert a.end == b.start and a.start < a.end
        for e in gt.gripper_events:
            assert stamps[e.frame_index] == e.time
        assert len(gt.boxes["observation.images.top"]) == ep.length


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_same_seed_same_dataset_other_seed_other_one(realistic: Path, tmp_path: Path) -> None:
    again = generate_synthetic(
        tmp_path / "again", episodes=3, cameras=("top",), seed=4, difficulty="realistic"
    )
    for name in ("data/chunk-000/file-000.parquet", "meta/steerable_ground_truth.json", "meta/stats.json"):
        assert _digest(realistic / name) == _digest(again / name), name
    other = generate_synthetic(
        tmp_path / "other", episodes=1, cameras=("top",), seed=5, difficulty="realistic"
    )
    ours = pq.read_table(realistic / "data/chunk-000/file-000.parquet", columns=["observation.state"])
    theirs = pq.read_table(other / "data/chunk-000/file-000.parquet", columns=["observation.state"])
    assert ours.slice(0, 10) != theirs.slice(0, 10)


def test_unknown_difficulty_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown difficulty 'insane'"):
        generate_synthetic(tmp_path / "x", episodes=1, difficulty="insane")
    with pytest.raises(ConfigError, match="--interjection_rate must be between 0 and 1"):
        generate_synthetic(tmp_path / "y", episodes=1, interjection_rate=1.5)
    assert REALISTIC.name == "realistic"
