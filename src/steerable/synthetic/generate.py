"""Generate the synthetic tabletop dataset: LeRobot v3 files plus the ground-truth sidecar."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from steerable.dataset.build import DatasetBuilder, frame_timestamps
from steerable.dataset.objects import write_object_schema
from steerable.errors import ConfigError
from steerable.synthetic.difficulty import EASY, Difficulty, get_difficulty
from steerable.synthetic.expert import Demo, demonstrate
from steerable.synthetic.ground_truth import (
    EpisodeTruth,
    Interjection,
    Outcome,
    RecordedScene,
    gripper_events,
    subtask_spans,
    write_ground_truth,
)
from steerable.synthetic.object_schema import simulator_objects
from steerable.synthetic.privileged import (
    ENVIRONMENT_STATE_FEATURE,
    ENVIRONMENT_STATE_NAMES,
    environment_state,
)
from steerable.synthetic.recording import Recording, record
from steerable.synthetic.render import CAMERAS, DEFAULT_CAMERA_SHAPES, camera_sizes
from steerable.synthetic.tasks import TaskSpec, add_redirect, sample_task, task_done
from steerable.synthetic.world import STATE_NAMES, WorldState, sample_world

__all__ = [
    "DEFAULT_INTERJECTION_RATE",
    "ORACLE_PRODUCER",
    "ROBOT_TYPE",
    "STATE_NAMES",
    "camera_key",
    "generate_synthetic",
    "record_episode",
    "recorded_scene",
    "simulate_episode",
    "synthetic_features",
]

logger = logging.getLogger(__name__)

ROBOT_TYPE = "steerable_sim_tabletop"
# Who wrote the oracle language rows, as recorded in meta/info.json.
ORACLE_PRODUCER = "synthetic:oracle"
# Share of episodes with a mid-placement redirect when oracle language is written.
DEFAULT_INTERJECTION_RATE = 0.5
# Purposes of the per-episode random streams besides the expert's own ([seed, episode]).
_REDIRECT_STREAM, _RECORDING_STREAM, _LANGUAGE_STREAM = 1, 2, 3


def camera_key(camera: str) -> str:
    return f"observation.images.{camera}"


def synthetic_features(
    cameras: Sequence[str], privileged_state: bool = False, camera_shapes: str = DEFAULT_CAMERA_SHAPES
) -> dict[str, dict]:
    """info.json features of the synthetic dataset for the chosen cameras (and the privileged state)."""
    features: dict[str, dict] = {
        "observation.state": {"dtype": "float32", "shape": [len(STATE_NAMES)], "names": list(STATE_NAMES)},
        "action": {"dtype": "float32", "shape": [len(STATE_NAMES)], "names": list(STATE_NAMES)},
    }
    if privileged_state:
        features[ENVIRONMENT_STATE_FEATURE] = {
            "dtype": "float32", "shape": [len(ENVIRONMENT_STATE_NAMES)], "names": list(ENVIRONMENT_STATE_NAMES)
        }
    sizes = camera_sizes(camera_shapes)
    for cam in cameras:
        width, height = sizes[cam]
        features[camera_key(cam)] = {"dtype": "video", "shape": [height, width, 3]}
    return features


def _check(episodes: int, cameras: Sequence[str], fps: int, interjection_rate: float) -> list[str]:
    if episodes < 1:
        raise ConfigError(f"--episodes must be at least 1, got {episodes}")
    if not 1 <= fps <= 120:
        raise ConfigError(f"--fps must be between 1 and 120, got {fps}")
    if not 0.0 <= interjection_rate <= 1.0:
        raise ConfigError(f"--interjection_rate must be between 0 and 1, got {interjection_rate}")
    cams = list(dict.fromkeys(cameras))
    unknown = [c for c in cams if c not in CAMERAS]
    if unknown or not cams:
        raise ConfigError(f"--cameras: unknown camera(s) {unknown or cams}: choose from {', '.join(CAMERAS)}")
    return cams


def _episode_start(
    seed: int, episode_index: int, level: Difficulty
) -> tuple[np.random.Generator, WorldState, TaskSpec]:
    """The expert's stream for the episode, the scene drawn from it, then the task (before any redirect)."""
    rng = np.random.default_rng([seed, episode_index])
    world = sample_world(rng)
    return rng, world, sample_task(world.scene, rng, level, world.positions)


def recorded_scene(seed: int, episode_index: int, difficulty: str | Difficulty = EASY) -> tuple[WorldState, TaskSpec]:
    """The initial world of episode `episode_index` of the dataset made with `seed` at `difficulty`,
    exactly as the generator drew it, and its task as drawn (a redirect, if any, is not applied):
    what `SimEnv.reset_to_recorded` starts from."""
    _, world, task = _episode_start(seed, episode_index, get_difficulty(difficulty))
    return world, task


def simulate_episode(
    seed: int,
    episode_index: int,
    fps: int,
    difficulty: str | Difficulty = EASY,
    interjection_rate: float = 0.0,
) -> tuple[TaskSpec, Demo]:
    """Episode `episode_index` of the dataset made with `seed`: its task and every world state.

    `interjection_rate`: the chance that one placement is redirected part way (`Demo.redirects`).
    """
    level = get_difficulty(difficulty)
    rng, world, task = _episode_start(seed, episode_index, level)
    if interjection_rate > 0:
        redirect_rng = np.random.default_rng([seed, episode_index, _REDIRECT_STREAM])
        if redirect_rng.random() < interjection_rate:
            task = add_redirect(task, world.scene, redirect_rng)
    return task, demonstrate(world, task, rng, fps, level)


def record_episode(
    seed: int,
    episode_index: int,
    fps: int,
    difficulty: str | Difficulty = EASY,
    interjection_rate: float = 0.0,
    cameras: Sequence[str] = (),
    camera_shapes: str = DEFAULT_CAMERA_SHAPES,
) -> tuple[TaskSpec, Recording, EpisodeTruth]:
    """Episode `episode_index` as `generate_synthetic` stores it, without writing files.

    `rec.state` / `rec.action` are the stored columns; the truth's boxes cover `cameras` only.
    The state does not depend on `cameras`, so a benchmark can score the annotator in memory.
    """
    level = get_difficulty(difficulty)
    sizes = camera_sizes(camera_shapes)
    task, demo = simulate_episode(seed, episode_index, fps, level, interjection_rate)
    cams = [c.rsplit(".", 1)[-1] for c in cameras]
    rec = record(demo, level, np.random.default_rng([seed, episode_index, _RECORDING_STREAM]), cams, fps, sizes)
    start, _ = recorded_scene(seed, episode_index, level)
    final = demo.states[-1]
    outcome = Outcome(
        task_done(final, task.steps, start),
        {cube.name: final.positions[i] for i, cube in enumerate(final.scene.cubes)},
    )
    scene = RecordedScene(seed, episode_index, level.name)
    return task, rec, _truth(episode_index, task.text, rec, cams, fps, scene, outcome)


def generate_synthetic(
    out: Path,
    *,
    episodes: int,
    cameras: Sequence[str] = ("top", "wrist"),
    seed: int = 0,
    fps: int = 15,
    difficulty: str | Difficulty = EASY,
    with_language: bool = False,
    interjection_rate: float | None = None,
    privileged_state: bool = False,
    camera_shapes: str = DEFAULT_CAMERA_SHAPES,
    on_episode: Callable[[], None] | None = None,
) -> Path:
    """Write `episodes` scripted tabletop demonstrations to `out`; same arguments, same bytes.

    `difficulty`: "easy" (clean), "realistic" or "hard" (`steerable.synthetic.difficulty`).
    `with_language`: also write the ground truth as language columns (`steerable.synthetic.oracle`).
    `interjection_rate`: share of episodes with a redirect (default 0.5 with language, else 0).
    `privileged_state`: also write every object's true position (`steerable.synthetic.privileged`)
    as `observation.environment_state`.
    `camera_shapes`: "equal" (both cameras 224x160, as `steerable run --env sim` renders them) or
    "legacy" (the wrist camera 128x128, as datasets made before).
    `on_episode` is called after each episode is written (a progress display).
    """
    level = get_difficulty(difficulty)
    sizes = camera_sizes(camera_shapes)
    rate = (
        (DEFAULT_INTERJECTION_RATE if with_language else 0.0)
        if interjection_rate is None
        else interjection_rate
    )
    cams = _check(episodes, cameras, fps, rate)
    out = Path(out)
    features = synthetic_features(cams, privileged_state, camera_shapes)
    builder = DatasetBuilder(out, fps=fps, features=features, robot_type=ROBOT_TYPE)
    truths: list[EpisodeTruth] = []
    tasks: list[TaskSpec] = []
    with builder:
        for ep in range(episodes):
            task, rec, truth = record_episode(seed, ep, fps, level, rate, cams, camera_shapes)
            columns = {"observation.state": rec.state, "action": rec.action}
            if privileged_state:
                columns[ENVIRONMENT_STATE_FEATURE] = np.stack(
                    [environment_state(rec.demo.states[int(t)]) for t in rec.ticks]
                )
            builder.add_episode(
                task.text,
                columns,
                {camera_key(c): rec.frames(c) for c in cams},
            )
            truths.append(truth)
            tasks.append(task)
            if on_episode is not None:
                on_episode()
            logger.debug("episode %d: %d frames, %r", ep, len(rec.ticks), task.text)
        # Into the folder being built, which the builder's exit commits to `out`.
        write_ground_truth(
            builder.build_dir, fps, {camera_key(c): sizes[c] for c in cams}, truths, level.name
        )
        if privileged_state:  # without it no object's position is recorded: nothing to describe
            write_object_schema(builder.build_dir, simulator_objects(privileged_state))
    if with_language:
        _write_language(out, seed, tasks, truths)
    return out


def _write_language(out: Path, seed: int, tasks: list[TaskSpec], truths: list[EpisodeTruth]) -> None:
    from steerable.dataset import open_dataset
    from steerable.dataset.writer import write_language
    from steerable.synthetic.oracle import episode_language

    updates = {
        t.episode_index: episode_language(
            task, t, np.random.default_rng([seed, t.episode_index, _LANGUAGE_STREAM])
        )
        for task, t in zip(tasks, truths, strict=True)
    }
    # Provenance as `steerable info` and the dataset card show it (style -> producer).
    styles = {
        str(row.get("style") or "tool_call")
        for lang in updates.values()
        for row in [*lang.persistent, *(r for _, r in lang.events)]
    }
    write_language(open_dataset(out), updates, producers={style: ORACLE_PRODUCER for style in styles})


def _truth(
    ep: int, task: str, rec: Recording, cams: list[str], fps: int, scene: RecordedScene, outcome: Outcome
) -> EpisodeTruth:
    ts = frame_timestamps(len(rec.ticks), fps)
    starts = [(rec.frame_of(f), text) for f, text in rec.demo.subtasks]
    interjections = [
        Interjection(
            float(ts[rec.frame_of(r.frame)]), rec.frame_of(r.frame), r.cube, r.old_target, r.new_target
        )
        for r in rec.demo.redirects
    ]
    return EpisodeTruth(
        episode_index=ep,
        task=task,
        subtasks=subtask_spans(starts, ts),
        gripper_events=gripper_events(rec.true_closure, ts),
        boxes={camera_key(c): rec.boxes(c) for c in cams},
        interjections=interjections,
        scene=scene,
        outcome=outcome,
    )
