"""Meta-World's own scripted policies recorded as a LeRobot v3 dataset with LeRobot's Meta-World features,
their phases as oracle subtasks (`steerable make-dataset metaworld`; docs/metaworld.md). `metaworld` is
imported only when a recording starts."""

from steerable.synthetic.metaworld.phase_texts import PHASE_TEXTS
from steerable.synthetic.metaworld.phases import BranchTracer, episode_language, phase_spans
from steerable.synthetic.metaworld.record import (
    CAMERA_KEY,
    FPS,
    ROBOT_TYPE,
    metaworld_features,
    record_metaworld,
)
from steerable.synthetic.metaworld.tasks import MetaWorldTasks, load_tasks

__all__ = [
    "CAMERA_KEY", "FPS", "PHASE_TEXTS", "ROBOT_TYPE", "BranchTracer", "MetaWorldTasks", "episode_language",
    "load_tasks", "metaworld_features", "phase_spans", "record_metaworld",
]
