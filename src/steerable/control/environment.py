"""The environment contract: the simulator, a LeRobot env or a LeRobot robot, as the runtime drives it.

An `Environment` is reset to an episode (a seed, and a task or, without one, a task it draws
itself), observed, sent one action per control step at `fps`, asked whether the task succeeded, and
closed. It names its features as a LeRobot dataset does: `state_names` (`observation.state`),
`action_names` (`action`), `camera_keys` (`observation.images.*`) and `camera_shapes()` (H, W, 3 per
camera key); `robot_type` goes into a recording's `meta/info.json`.

Some abilities are optional; the runtime checks them with `isinstance` against the protocols below:
- `DescribesScene`: the scene and where things ended up, in words (`steerable run` prints them);
- `TakesInterjections`: an operator's correction planned for an evaluation episode, when to say
  it, and the corrected task success is then checked against (`steerable run --eval_interjections`);
- `ProvidesEnvironmentState`: every object's true position as one vector, in its observations
  (`Observation.environment_state`: what `--observation privileged` lets a policy read);
- `RecordsGroundTruth`: a recording's ground truth, kept frame by frame and written beside it (the
  simulator's: what `steerable eval` scores an annotator on);
- `ScriptsPlanner` / `ScriptsController`: the env's test doubles behind `--high_level scripted` /
  `--low_level scripted`;
- `SeedsForTask`: the first seed whose scene fits a task (the session's seed when none is given);
and by name: `episode_over()` (the env ended the episode itself, as a gym env that terminated or
truncated: an evaluation episode stops there).

Environments are built by name through the runtime's registry (`steerable.runtime.environments`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol, runtime_checkable

import numpy as np

from steerable.control.types import HighLevelModel, LowLevelController, Observation

__all__ = [
    "Body",
    "DescribesScene",
    "Environment",
    "EpisodeSpec",
    "ObservationKind",
    "ProvidesEnvironmentState",
    "RecordedEpisode",
    "RecordsGroundTruth",
    "ScriptsController",
    "ScriptsPlanner",
    "SeedsForTask",
    "TakesInterjections",
]


@dataclass(frozen=True)
class EpisodeSpec:
    """What `Environment.reset` started: the task text actually used, and how an evaluation groups it
    (`kind`, e.g. "single", "2-step", "stack", "push"; "free-form" when the env knows no structure)."""

    task: str
    kind: str = "free-form"


@runtime_checkable
class Body(Protocol):
    """What the control loop itself drives of an environment: observations in, actions out."""

    def observe(self, *, render: bool = True) -> Observation:
        """The current observation; `render=False` skips camera frames (faster, for scripted stacks)."""
        ...

    def send_action(self, action: np.ndarray) -> None:
        """Execute one action (one step at `fps`). An environment that may execute another one (a
        robot bounding each target's change) keeps what it sent as `last_sent`: a recording stores that."""
        ...


@runtime_checkable
class Environment(Body, Protocol):
    """Something that is reset to an episode, observes and acts at `fps`, and judges success."""

    fps: int
    robot_type: str
    state_names: tuple[str, ...]
    action_names: tuple[str, ...]
    camera_keys: tuple[str, ...]

    def camera_shapes(self) -> dict[str, tuple[int, int, int]]:
        """(height, width, 3) of each camera key's frames."""
        ...

    def reset(self, seed: int, task: str | None = None) -> EpisodeSpec:
        """A new episode from `seed`, with `task` (its text) or, when None, a task the env draws."""
        ...

    def success(self) -> bool | None:
        """Whether the episode's task is done now; None when the env cannot tell."""
        ...

    def close(self) -> None:
        """Stop the robot / release the simulator."""
        ...


@runtime_checkable
class DescribesScene(Protocol):
    """An environment that can say what its scene holds and where things ended up."""

    def describe_scene(self) -> str:
        """The scene in one line (e.g. "cubes: red cube, ...; receptacles: blue bin (left), ...")."""
        ...

    def final_report(self, task: str) -> str:
        """Where the objects `task` names are now, in words ("" when there is nothing to say)."""
        ...


@runtime_checkable
class TakesInterjections(Protocol):
    """An environment that can correct an evaluation episode's task part way, as an operator would."""

    def plan_interjection(self, seed: int) -> str | None:
        """Arm one correction of the episode just reset; what the operator will say (None: none fits)."""
        ...

    def interjection_due(self) -> bool:
        """Whether the armed correction is to be said now (asked once per control step)."""
        ...

    def apply_interjection(self) -> None:
        """The correction was said: from now on success is checked against the corrected task."""
        ...


# What a run lets a policy read of an observation (`--observation`): "standard", or "privileged": also every
# object's true position, from an environment that `ProvidesEnvironmentState` (the simulator).
ObservationKind = Literal["standard", "privileged"]


@runtime_checkable
class ProvidesEnvironmentState(Protocol):
    """An environment that knows where every object is: its observations carry the vector
    (`Observation.environment_state`), one value per name of `environment_state_names`."""

    environment_state_names: tuple[str, ...]


@dataclass(frozen=True)
class RecordedEpisode:
    """One recorded episode as its ground truth needs it: `truths` holds what `frame_truth` kept of
    each frame, `times` (n,) the frames' timestamps, `subtask_starts` (frame, subtask) where each
    subtask took effect (the first at frame 0), `frame_sizes` each camera key's (width, height)."""

    index: int
    task: str
    truths: Sequence[object]
    times: np.ndarray
    subtask_starts: Sequence[tuple[int, str]]
    frame_sizes: Mapping[str, tuple[int, int]]


@runtime_checkable
class RecordsGroundTruth(Protocol):
    """An environment whose recordings get a ground-truth sidecar (`steerable run --record`)."""

    def frame_truth(self, observation: Observation) -> object | None:
        """What a recording keeps of this observation's ground truth (None: this frame has none)."""
        ...

    def write_ground_truth(self, root: Path, fps: int, episodes: Sequence[RecordedEpisode]) -> None:
        """Write the ground truth of `episodes` (each with a truth for every frame) into the dataset at `root`."""
        ...


@runtime_checkable
class ScriptsPlanner(Protocol):
    """An environment with a scripted high level (`--high_level scripted`), a test double that may read its truth."""

    def scripted_planner(self) -> HighLevelModel:
        """A new scripted planner for this environment."""
        ...


@runtime_checkable
class ScriptsController(Protocol):
    """An environment with a scripted low level (`--low_level scripted`), a test double or a baseline."""

    def scripted_controller(self) -> LowLevelController:
        """A new scripted controller for this environment."""
        ...


@runtime_checkable
class SeedsForTask(Protocol):
    """An environment that can find a scene a task fits: `steerable run --task T` without `--seed` starts there."""

    def seed_for_task(self, task: str) -> int:
        """The first seed whose scene `task` fits (0 if none)."""
        ...
