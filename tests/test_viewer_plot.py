"""The viewer's episode payload on real data: the plot's per-dim scale and flat dims, and who wrote each track."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from steerable.dataset import LeRobotDataset
from steerable.dataset.build import DatasetBuilder
from steerable.viewer import ViewerData


def payload(root: Path, episode: int) -> dict:
    return ViewerData(LeRobotDataset(root), episodes=[episode]).episode(episode, lambda camera, ep: ("", 0.0))


def test_real_idle_joints_are_drawn_flat_on_the_dataset_range(lingzu: Path) -> None:
    ds = LeRobotDataset(lingzu)
    state = {s["key"]: s for s in payload(lingzu, 0)["plot"]["series"]}["state"]
    stats = ds.stats["state"]
    # scaled by the dataset's range of each dim (meta/stats.json), not the episode's own
    assert state["range"] == [[pytest.approx(lo, abs=1e-4), pytest.approx(hi, abs=1e-4)]
                              for lo, hi in zip(stats["min"], stats["max"], strict=True)]
    names = state["names"]
    left = [i for i, n in enumerate(names) if n.startswith("left.joint_")]
    right = [i for i, n in enumerate(names) if n.startswith("right.joint_")]
    # the left arm only jitters by an encoder tick or three (its dataset range <= 1.5 deg, the right arm's >= 13)
    assert set(left) <= set(state["flat"])
    assert not set(right) & set(state["flat"])
    values = np.array(state["values"], dtype=float)
    still = [i for i in range(len(names)) if np.nanmax(values[i]) == np.nanmin(values[i])]
    assert set(still) <= set(state["flat"])  # a dim that never moves in the episode is flat too


def test_without_stats_the_episode_range_scales_and_still_dims_are_flat(tmp_path: Path) -> None:
    frames = 60
    t = np.linspace(0, 1, frames)
    rng = np.random.default_rng(0)
    state = np.stack([10 * t, 90 + 1e-3 * rng.standard_normal(frames), np.full(frames, 3.0)], axis=1)
    features = {"observation.state": {"dtype": "float32", "shape": [3], "names": ["a.pos", "b.pos", "c.pos"]}}
    with DatasetBuilder(tmp_path / "ds", fps=10, features=features, robot_type="test") as b:
        b.add_episode("task", {"observation.state": state.astype(np.float32)})
    (tmp_path / "ds" / "meta" / "stats.json").unlink()
    (series,) = payload(tmp_path / "ds", 0)["plot"]["series"]
    low, high = state.astype(np.float32).min(axis=0), state.astype(np.float32).max(axis=0)
    assert series["range"] == [[pytest.approx(lo, abs=1e-4), pytest.approx(hi, abs=1e-4)]
                               for lo, hi in zip(low, high, strict=True)]
    assert series["flat"] == [1, 2]  # b jitters by 1e-3 around 90 while a moves by 10; c never moves


def test_heuristic_tracks_are_marked_as_info_shows_them(viewer_ds: Path) -> None:
    producers = json.loads((viewer_ds / "meta" / "steerable_provenance.json").read_text())["producers"]
    assert producers["subtask"] == "heuristic:motion"  # `annotate` without a model: the motion heuristics
    data = ViewerData(LeRobotDataset(viewer_ds))
    assert data.summary()["producers"] == producers
    tracks = {t["style"]: t for t in data.episode(0, lambda camera, ep: ("", 0.0))["tracks"]}
    assert tracks["subtask"]["producer"] == "heuristic:motion" and tracks["subtask"]["heuristic"] is True
    assert tracks["motion"]["heuristic"] is True
    assert tracks["vqa"]["producer"] is None and tracks["vqa"]["heuristic"] is False
