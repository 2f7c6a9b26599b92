"""Replay a synthetic dataset's recorded actions in the simulator, from each episode's own scene.

The check that the data are executable: an episode's initial world is rebuilt exactly as the
generator drew it (`SimEnv.reset_to_recorded`, from the `scene` the ground truth stores), its
`action` column is sent to the simulator one action per step at the dataset's fps, and the
outcome (`SimEnv.success()`, each step, each cube's final position) is compared with the one the
recording stores (the ground truth's `outcome`). An episode with an interjection has its
placement retargeted, as the expert was: success is checked against the target it ended with.
`steerable run --replay DATASET` is this module on the command line.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from steerable.errors import ConfigError, DatasetNotFoundError
from steerable.synthetic.generate import STATE_NAMES
from steerable.synthetic.ground_truth import EpisodeTruth, read_ground_truth
from steerable.synthetic.tasks import step_satisfied

if TYPE_CHECKING:
    from steerable.dataset.lerobot import LeRobotDataset
    from steerable.synthetic.env import SimEnv

__all__ = ["Replay", "ReplayReport", "ReplayResult", "open_replay", "replay_episode", "wilson_interval"]

_REGENERATE = "regenerate it with `steerable make-dataset synthetic` to replay it"


@dataclass(frozen=True)
class ReplayResult:
    """One episode replayed: the recorded and the replayed outcome, and how far each cube ended from
    where the recording left it (metres)."""

    episode_index: int
    task: str
    difficulty: str
    frames: int
    recorded_success: bool
    replayed_success: bool
    steps: tuple[bool, ...]  # each step of the task holds after the replay
    cube_errors: dict[str, float]

    @property
    def reproduced(self) -> bool:
        return self.replayed_success == self.recorded_success

    @property
    def max_error(self) -> float:
        return max(self.cube_errors.values(), default=0.0)

    def why(self) -> str:
        """What differed, in words ('' when the outcome was reproduced)."""
        if self.reproduced:
            return ""
        failed = [str(i + 1) for i, ok in enumerate(self.steps) if not ok]
        worst = max(self.cube_errors, key=lambda k: self.cube_errors[k], default="")
        return (
            f"episode {self.episode_index} ({self.difficulty}, {self.task!r}): recorded "
            f"{'success' if self.recorded_success else 'failure'}, replayed "
            f"{'success' if self.replayed_success else 'failure'}"
            + (f" (step {', '.join(failed)} not done)" if failed else "")
            + (f"; the {worst} ended {self.cube_errors[worst] * 1000:.1f} mm from the recording" if worst else "")
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "episode_index": self.episode_index,
            "task": self.task,
            "difficulty": self.difficulty,
            "frames": self.frames,
            "recorded_success": self.recorded_success,
            "replayed_success": self.replayed_success,
            "reproduced": self.reproduced,
            "steps": list(self.steps),
            "cube_errors_m": {k: round(v, 6) for k, v in self.cube_errors.items()},
            "max_error_m": round(self.max_error, 6),
        }


@dataclass(frozen=True)
class ReplayReport:
    dataset: str
    results: tuple[ReplayResult, ...]

    @property
    def recorded_successes(self) -> int:
        return sum(r.recorded_success for r in self.results)

    @property
    def reproduced_successes(self) -> int:
        """Recorded successes that succeeded again when replayed."""
        return sum(r.recorded_success and r.replayed_success for r in self.results)

    @property
    def reproduction_rate(self) -> float | None:
        n = self.recorded_successes
        return self.reproduced_successes / n if n else None

    def to_json(self) -> dict[str, Any]:
        rate = self.reproduction_rate
        return {
            "dataset": self.dataset,
            "episodes": [r.to_json() for r in self.results],
            "recorded_successes": self.recorded_successes,
            "reproduced_successes": self.reproduced_successes,
            "reproduction_rate": rate,
            "reproduction_rate_95": list(wilson_interval(self.reproduced_successes, self.recorded_successes)),
            "outcomes_reproduced": sum(r.reproduced for r in self.results),
            "max_error_m": round(max((r.max_error for r in self.results), default=0.0), 6),
        }

    def lines(self) -> list[str]:
        """A plain table, one row per episode, then the summary."""
        out = [f"{'episode':>7}  {'frames':>6}  {'recorded':<8}  {'replayed':<8}  final cube error (mm)"]
        for r in self.results:
            errors = ", ".join(f"{k.removesuffix(' cube')} {v * 1000:.1f}" for k, v in r.cube_errors.items())
            out.append(
                f"{r.episode_index:>7}  {r.frames:>6}  {_word(r.recorded_success):<8}  "
                f"{_word(r.replayed_success):<8}  {errors}"
            )
        rate = self.reproduction_rate
        low, high = wilson_interval(self.reproduced_successes, self.recorded_successes)
        out.append(
            f"replayed {len(self.results)} episode(s) of {self.dataset}: {self.reproduced_successes} of "
            f"{self.recorded_successes} recorded successes reproduced"
            + (f" ({rate:.1%}, 95 % interval {low:.1%}-{high:.1%})" if rate is not None else "")
            + f"; largest final cube error {max((r.max_error for r in self.results), default=0.0) * 1000:.1f} mm"
        )
        out.extend(r.why() for r in self.results if not r.reproduced)
        return out


def _word(success: bool) -> str:
    return "success" if success else "failure"


def wilson_interval(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The 95 % Wilson score interval of a proportion (0, 1 when n is 0)."""
    if n <= 0:
        return (0.0, 1.0)
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


def replay_episode(env: SimEnv, truth: EpisodeTruth, actions: np.ndarray) -> ReplayResult:
    """Send `actions` (the episode's `action` column, frames x 4) to `env` from the episode's own scene."""
    if truth.scene is None or truth.outcome is None:
        raise ConfigError(
            f"episode {truth.episode_index}'s ground truth records no scene to replay from (made before "
            f"replay existed, or by `steerable run --record`): {_REGENERATE}"
        )
    scene = truth.scene
    episode = env.reset_to_recorded(scene.seed, scene.episode, scene.difficulty)
    if episode.task != truth.task:
        raise ConfigError(
            f"episode {truth.episode_index}: the rebuilt scene's task {episode.task!r} is not the recorded "
            f"{truth.task!r} (the ground truth does not belong to these episodes): {_REGENERATE}"
        )
    for turn in truth.interjections:  # the placement the person redirected, as the expert followed it
        index = next((i for i, s in enumerate(episode.steps) if s.cube == turn.cube and not s.push), None)
        if index is None:
            raise ConfigError(
                f"episode {truth.episode_index}: its interjection moves the {turn.cube}, which no step of "
                f"{truth.task!r} places: {_REGENERATE}"
            )
        env.change_target(index, turn.new_target, episode.steps[index].stack)
    for action in np.asarray(actions, dtype=np.float64):
        env.send_action(action)
    world, start = env.world, env.start
    assert world is not None and env.episode is not None and env.episode.steps is not None
    errors = {
        cube.name: float(np.linalg.norm(np.subtract(world.positions[i], truth.outcome.cubes[cube.name])))
        for i, cube in enumerate(world.scene.cubes)
    }
    return ReplayResult(
        episode_index=truth.episode_index,
        task=truth.task,
        difficulty=scene.difficulty,
        frames=len(actions),
        recorded_success=truth.outcome.success,
        replayed_success=bool(env.success()),
        steps=tuple(step_satisfied(world, s, start) for s in env.episode.steps),
        cube_errors=errors,
    )


class Replay:
    """The episodes of a synthetic dataset to replay; `run` replays them (`open_replay` checks first)."""

    def __init__(self, dataset: LeRobotDataset, truths: dict[int, EpisodeTruth], episodes: list[int]) -> None:
        self.dataset, self.truths, self.episodes = dataset, truths, episodes

    def run(self, on_result: Callable[[ReplayResult], None] | None = None) -> ReplayReport:
        from steerable.dataset.frames import feature_matrix
        from steerable.synthetic.env import SimEnv

        env = SimEnv(fps=self.dataset.fps, cameras=())
        results = []
        for index in self.episodes:
            actions = feature_matrix(self.dataset.read_episode(index, ["action"]), "action")
            result = replay_episode(env, self.truths[index], actions)
            results.append(result)
            if on_result is not None:
                on_result(result)
        return ReplayReport(str(self.dataset.root), tuple(results))


def open_replay(source: Path | str, episodes: Sequence[int] | None = None) -> Replay:
    """A synthetic dataset's episodes (`episodes`, default all), checked to be replayable: one
    `ConfigError` line for a dataset without a ground truth, without scenes, or with other actions."""
    from steerable.dataset import open_dataset

    dataset = open_dataset(source)
    where = f"--replay {dataset.root}"
    try:
        truths = read_ground_truth(dataset.root)
    except DatasetNotFoundError:
        raise ConfigError(
            f"{where}: not a synthetic dataset (no meta/steerable_ground_truth.json): only datasets made by "
            "`steerable make-dataset synthetic` can be replayed in the simulator"
        ) from None
    names = dataset.features.get("action", {}).get("names")
    if names != STATE_NAMES:
        raise ConfigError(f"{where}: its actions are {names}, not the simulator's {STATE_NAMES}")
    wanted = list(episodes) if episodes is not None else [e.episode_index for e in dataset.episodes]
    for index in wanted:
        dataset.episode(index)  # one line naming the episodes there are
        truth = truths.get(index)
        if truth is None or truth.scene is None or truth.outcome is None:
            raise ConfigError(
                f"{where}: episode {index}'s ground truth records no scene to replay from (made before "
                f"replay existed, or by `steerable run --record`): {_REGENERATE}"
            )
    return Replay(dataset, truths, wanted)
