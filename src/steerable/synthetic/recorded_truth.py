"""What the simulator adds to a recording and to its observations beyond the robot's own view.

`SimGroundTruth` is the simulator's side of two optional abilities of `steerable.control`:
`ProvidesEnvironmentState` (the names of the vector its observations carry) and `RecordsGroundTruth`
(each recorded frame's world, turned into the ground-truth sidecar of `steerable.synthetic.ground_truth`:
the subtasks executed, gripper events, object boxes), so the runtime records either without
knowing the simulator.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from steerable.control import Observation, RecordedEpisode
from steerable.synthetic.ground_truth import EpisodeTruth, gripper_events, subtask_spans, write_ground_truth
from steerable.synthetic.privileged import ENVIRONMENT_STATE_NAMES
from steerable.synthetic.render import object_boxes
from steerable.synthetic.world import WorldState

__all__ = ["SimGroundTruth"]


class SimGroundTruth:
    """The simulator's ground truth for the runtime (a mixin of `steerable.synthetic.env.SimEnv`)."""

    environment_state_names: tuple[str, ...] = ENVIRONMENT_STATE_NAMES

    def frame_truth(self, observation: Observation) -> object | None:
        """The frame's world (its observation carries it for the scripted test doubles)."""
        world = observation.privileged
        return world if isinstance(world, WorldState) else None

    def write_ground_truth(self, root: Path, fps: int, episodes: Sequence[RecordedEpisode]) -> None:
        cameras: dict[str, tuple[int, int]] = {}
        for episode in episodes:
            cameras.update(episode.frame_sizes)
        write_ground_truth(root, fps, cameras, [_truth(episode) for episode in episodes])


def _truth(episode: RecordedEpisode) -> EpisodeTruth:
    worlds = [world for world in episode.truths if isinstance(world, WorldState)]
    if len(worlds) != len(episode.truths):
        raise ValueError(f"episode {episode.index}: a frame's truth is not the simulator's world")
    closure = np.array([world.gripper.closure for world in worlds])
    boxes: dict[str, list[list[dict[str, Any]]]] = {
        key: [object_boxes(world, key, size) for world in worlds] for key, size in episode.frame_sizes.items()
    }
    return EpisodeTruth(episode.index, episode.task, subtask_spans(episode.subtask_starts, episode.times),
                        gripper_events(closure, episode.times), boxes)
