"""Record Meta-World's own scripted policies as a LeRobot v3 dataset, as LeRobot's Meta-World env sees them.

The scene is built as LeRobot's env builds it (`lerobot/envs/metaworld.py`): the task's `MT1` benchmark
with seed 42 and its first train task, the `corner2` camera moved to LeRobot's position and its image
turned right side up, object positions drawn from the episode's seed (`reset(seed)`). A frame holds
what that env gives a policy: the image (`observation.image`), the hand's position and the gripper's
opening (`observation.state`, the first 4 values of Meta-World's observation), and the action sent
(`action`: hand motion and grip effort, clipped to [-1, 1] as the env clips it). The task is LeRobot's
description of the task. Only successful episodes are kept: an episode ends at the step Meta-World
reports success (where LeRobot's evaluation ends it), and one that has not succeeded within `max_steps`
is dropped and the next seed tried. The images are rendered at `image_size` (a CPU renders 480 x 480 at
a few steps a second); the policy resizes whatever size the env gives it.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import logging
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from steerable.dataset.build import DatasetBuilder, frame_timestamps
from steerable.dataset.writer import EpisodeLanguage
from steerable.errors import ConfigError, DatasetError, MissingExtraError
from steerable.synthetic.metaworld.phase_texts import PHASE_TEXTS
from steerable.synthetic.metaworld.phases import BranchTracer, episode_language, phase_spans
from steerable.synthetic.metaworld.tasks import INSTALL_HINT, load_tasks

__all__ = ["CAMERA_KEY", "FPS", "ORACLE_PRODUCER", "ROBOT_TYPE", "metaworld_features", "record_metaworld"]

logger = logging.getLogger(__name__)

ROBOT_TYPE = "metaworld"  # LeRobot's env type, as `steerable run --env lerobot --env.type=metaworld` names it
FPS = 80  # LeRobot's Meta-World env config steps at 80 fps
CAMERA_KEY = "observation.image"  # LeRobot's key for the env's one camera (`pixels`)
STATE_NAMES = ["hand.x", "hand.y", "hand.z", "gripper.opening"]
ACTION_NAMES = ["hand.dx", "hand.dy", "hand.dz", "gripper.effort"]
ORACLE_PRODUCER = "metaworld:scripted-policy-branches"
_CAMERA = "corner2"
_CAMERA_POSITION = (0.75, 0.075, 0.7)  # where LeRobot's env puts corner2
_MT1_SEED = 42
_ATTEMPTS_PER_EPISODE = 3  # seeds tried per wanted episode before a task is given up


def metaworld_features(image_size: int) -> dict[str, dict[str, Any]]:
    """info.json features: LeRobot's Meta-World observation (one camera, 4-d state) and its 4-d action."""
    return {
        "observation.state": {"dtype": "float32", "shape": [4], "names": list(STATE_NAMES)},
        "action": {"dtype": "float32", "shape": [4], "names": list(ACTION_NAMES)},
        CAMERA_KEY: {"dtype": "video", "shape": [image_size, image_size, 3]},
    }


@dataclass
class Demonstration:
    """One rolled-out episode: stored columns, frames, the branch of each step, and whether it succeeded."""

    state: np.ndarray
    action: np.ndarray
    frames: list[np.ndarray]
    branches: list[int | None]
    success: bool


def _import_metaworld() -> tuple[Any, Any]:
    try:
        metaworld = importlib.import_module("metaworld")
        policies = importlib.import_module("metaworld.policies")
    except ImportError as exc:
        raise MissingExtraError("metaworld", "metaworld") from exc
    mujoco = importlib.metadata.version("mujoco")
    if tuple(int(p) for p in mujoco.split(".")[:2] if p.isdigit()) >= (3, 3):
        raise ConfigError(f"metaworld 3.0.0 fails with mujoco {mujoco} (>= 3.3): pip install 'mujoco<3.3'")
    return metaworld, policies


class MetaWorldScene:
    """One task's Meta-World env, set up as LeRobot's env sets it up, rendering at `image_size`."""

    def __init__(self, metaworld: Any, task: str, image_size: int) -> None:
        benchmark = metaworld.MT1(task, seed=_MT1_SEED)
        try:
            env = benchmark.train_classes[task](render_mode="rgb_array", camera_name=_CAMERA, width=image_size,
                                                height=image_size)
            env.set_task(benchmark.train_tasks[0])
            env.model.cam_pos[env.model.camera(_CAMERA).id] = _CAMERA_POSITION
            env.reset()
            env._freeze_rand_vec = False  # each seed its own object positions, as in LeRobot's env
            env.seeded_rand_vec = True
        except Exception as exc:  # noqa: BLE001  (MuJoCo and its GL back end raise anything)
            raise ConfigError(f"Meta-World's {task} does not start ({type(exc).__name__}: {exc}); {INSTALL_HINT}, "
                              "and MUJOCO_GL=osmesa (Debian's libosmesa6) or egl to render") from exc
        self.env = env

    def reset(self, seed: int) -> np.ndarray:
        self.env.seed(seed)
        observation, _ = self.env.reset(seed=seed)
        return np.asarray(observation)

    def step(self, action: np.ndarray) -> tuple[np.ndarray, bool]:
        observation, _, _, _, info = self.env.step(action)
        return np.asarray(observation), bool(info.get("success", 0))

    def render(self) -> np.ndarray:
        try:
            image = self.env.render()
        except Exception as exc:  # noqa: BLE001
            raise ConfigError(f"Meta-World does not render ({type(exc).__name__}: {exc}): set MUJOCO_GL=osmesa "
                              "(Debian's libosmesa6) on a machine without a GPU, or MUJOCO_GL=egl") from exc
        return np.ascontiguousarray(np.flip(image, (0, 1)))  # corner2 renders upside down and mirrored

    def close(self) -> None:
        self.env.close()


def demonstrate(scene: MetaWorldScene, policy: Any, seed: int, max_steps: int) -> Demonstration:
    """The scripted policy from the scene reset with `seed`, until success or `max_steps` steps."""
    tracer = BranchTracer(policy)
    observation = scene.reset(seed)
    states: list[np.ndarray] = []
    actions: list[np.ndarray] = []
    frames: list[np.ndarray] = []
    branches: list[int | None] = []
    success = False
    while len(actions) < max_steps and not success:
        with warnings.catch_warnings():  # the policies warn at each step that the env clips their actions
            warnings.filterwarnings("ignore", message="Constant", category=UserWarning)
            action, branch = tracer.act(observation)
        action = np.clip(np.asarray(action, dtype=np.float32), -1.0, 1.0)
        states.append(observation[:4].astype(np.float32))
        frames.append(scene.render())
        actions.append(action)
        branches.append(branch)
        observation, success = scene.step(action)
    return Demonstration(np.stack(states), np.stack(actions), frames, branches, success)


def record_metaworld(
    out: Path,
    *,
    tasks: str,
    episodes: int,
    image_size: int = 64,
    seed: int = 0,
    max_steps: int = 500,
    on_episode: Callable[[], None] | None = None,
) -> dict[str, int]:
    """Write `episodes` successful demonstrations of each task in `tasks` (comma-separated Meta-World task
    names or LeRobot's groups) to `out`; returns {task: seeds tried}. Episode seeds count up from `seed`
    per task (`lerobot-eval` starts at 1000). Oracle subtasks go in as language rows where the task's
    phases are named (`phase_texts`)."""
    table = load_tasks()
    names = table.expand(tasks)
    if episodes < 1 or max_steps < 1:
        raise ConfigError(f"--episodes and --max_steps must be at least 1, got {episodes} and {max_steps}")
    if not 8 <= image_size <= 480:
        raise ConfigError(f"--image_size must be between 8 and 480 pixels, got {image_size}")
    metaworld, policies = _import_metaworld()
    tried: dict[str, int] = {}
    language: dict[int, EpisodeLanguage] = {}
    builder = DatasetBuilder(Path(out), fps=FPS, features=metaworld_features(image_size), robot_type=ROBOT_TYPE)
    with builder:
        for task in names:
            tried[task] = _record_task(builder, language, metaworld, policies, table.policies[task], task,
                                       table.descriptions[task], episodes, image_size, seed, max_steps, on_episode)
    if language:
        from steerable.dataset import open_dataset
        from steerable.dataset.writer import write_language

        write_language(open_dataset(out), language,
                       producers={style: ORACLE_PRODUCER for style in ("subtask", "plan", "memory")})
    return tried


def _record_task(builder: DatasetBuilder, language: dict[int, EpisodeLanguage], metaworld: Any, policies: Any,
                 policy_name: str, task: str, description: str, episodes: int, image_size: int, seed: int,
                 max_steps: int, on_episode: Callable[[], None] | None) -> int:
    """Add `episodes` successful episodes of one task; returns the seeds tried."""
    scene = MetaWorldScene(metaworld, task, image_size)
    policy = getattr(policies, policy_name)()
    texts = PHASE_TEXTS.get(task)
    if texts is not None and BranchTracer(policy).branches != len(texts):
        logger.warning("%s: the scripted policy's branches are not the named phases (another metaworld?): task "
                       "only", task)
        texts = None
    kept = attempts = 0
    try:
        while kept < episodes:
            if attempts >= episodes * _ATTEMPTS_PER_EPISODE:
                raise DatasetError(f"{task}: the scripted policy succeeded in {kept} of {attempts} episodes (seeds "
                                   f"{seed}..{seed + attempts - 1}) within --max_steps {max_steps}; ask for fewer "
                                   "episodes or more steps")
            demo = demonstrate(scene, policy, seed + attempts, max_steps)
            attempts += 1
            if not demo.success:
                logger.info("%s seed %d: no success in %d steps, dropped", task, seed + attempts - 1, max_steps)
                continue
            index = builder.add_episode(description, {"observation.state": demo.state, "action": demo.action},
                                        {CAMERA_KEY: demo.frames})
            kept += 1
            spans = phase_spans(demo.branches, texts)
            if spans:
                language[index] = episode_language(spans, frame_timestamps(len(demo.branches), FPS).tolist())
            if on_episode is not None:
                on_episode()
    finally:
        scene.close()
    return attempts

