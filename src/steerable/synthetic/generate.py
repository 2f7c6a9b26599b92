"""Generate the synthetic tabletop dataset: LeRobot v3 files plus the ground-truth sidecar."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

from steerable.dataset.build import DatasetBuilder, frame_timestamps
from steerable.errors import ConfigError
from steerable.synthetic.expert import Demo, demonstrate
from steerable.synthetic.ground_truth import (
    EpisodeTruth,
    gripper_events,
    subtask_spans,
    write_ground_truth,
)
from steerable.synthetic.render import CAMERAS, object_boxes, render_frame
from steerable.synthetic.tasks import TaskSpec, sample_task
from steerable.synthetic.world import WorldState, sample_world

__all__ = [
    "ROBOT_TYPE",
    "STATE_NAMES",
    "camera_key",
    "generate_synthetic",
    "simulate_episode",
    "synthetic_features",
]

logger = logging.getLogger(__name__)

ROBOT_TYPE = "steerable_sim_tabletop"
# ee.* in metres in the table frame; gripper.closure 0 = open .. 1 = closed (the name says which way).
STATE_NAMES = ["ee.x", "ee.y", "ee.z", "gripper.closure"]


def camera_key(camera: str) -> str:
    return f"observation.images.{camera}"


def synthetic_features(cameras: Sequence[str]) -> dict[str, dict]:
    """info.json features of the synthetic dataset for the chosen cameras."""
    features: dict[str, dict] = {
        "observation.state": {"dtype": "float32", "shape": [len(STATE_NAMES)], "names": list(STATE_NAMES)},
        "action": {"dtype": "float32", "shape": [len(STATE_NAMES)], "names": list(STATE_NAMES)},
    }
    for cam in cameras:
        width, height = CAMERAS[cam]
        features[camera_key(cam)] = {"dtype": "video", "shape": [height, width, 3]}
    return features


def _check(episodes: int, cameras: Sequence[str], fps: int) -> list[str]:
    if episodes < 1:
        raise ConfigError(f"episodes must be at least 1, got {episodes}")
    if not 1 <= fps <= 120:
        raise ConfigError(f"fps must be between 1 and 120, got {fps}")
    cams = list(dict.fromkeys(cameras))
    unknown = [c for c in cams if c not in CAMERAS]
    if unknown or not cams:
        raise ConfigError(f"unknown camera(s) {unknown or cams}: choose from {', '.join(CAMERAS)}")
    return cams


def _frames(states: list[WorldState], camera: str) -> Iterator[np.ndarray]:
    return (render_frame(s, camera) for s in states)


def simulate_episode(seed: int, episode_index: int, fps: int) -> tuple[TaskSpec, Demo]:
    """Episode `episode_index` of the dataset made with `seed`: its task and every world state."""
    rng = np.random.default_rng([seed, episode_index])
    world = sample_world(rng)
    task = sample_task(world.scene, rng)
    return task, demonstrate(world, task, rng, fps)


def generate_synthetic(
    out: Path, *, episodes: int, cameras: Sequence[str] = ("top", "wrist"), seed: int = 0, fps: int = 15
) -> Path:
    """Write `episodes` scripted tabletop demonstrations to `out`; same seed, same bytes."""
    cams = _check(episodes, cameras, fps)
    out = Path(out)
    builder = DatasetBuilder(out, fps=fps, features=synthetic_features(cams), robot_type=ROBOT_TYPE)
    truths: list[EpisodeTruth] = []
    with builder:
        for ep in range(episodes):
            task, demo = simulate_episode(seed, ep, fps)
            state = demo.observations()
            builder.add_episode(
                task.text,
                {"observation.state": state, "action": demo.actions()},
                {camera_key(c): _frames(demo.states, c) for c in cams},
            )
            truths.append(_truth(ep, task.text, demo, state, cams, fps))
            logger.debug("episode %d: %d frames, %r", ep, len(demo.states), task.text)
        # Before the builder's exit writes info.json, which marks the dataset complete.
        write_ground_truth(out, fps, {camera_key(c): CAMERAS[c] for c in cams}, truths)
    return out


def _truth(ep: int, task: str, demo: Demo, state: np.ndarray, cams: list[str], fps: int) -> EpisodeTruth:
    ts = frame_timestamps(len(demo.states), fps)
    return EpisodeTruth(
        episode_index=ep,
        task=task,
        subtasks=subtask_spans(demo.subtasks, ts),
        gripper_events=gripper_events(state[:, STATE_NAMES.index("gripper.closure")], ts),
        boxes={camera_key(c): [object_boxes(s, c) for s in demo.states] for c in cams},
    )
