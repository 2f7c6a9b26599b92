"""The no-model motion annotator: keystates, motion primitives and heuristic subtasks from proprioception.

Pure functions over numpy arrays of one episode; the annotation pipeline reads the frames and
writes the rows. Algorithm, thresholds and limits: docs/motion.md.
"""

from steerable.annotate.motion.config import MotionConfig
from steerable.annotate.motion.dims import DimSelection, Gripper, find_dims
from steerable.annotate.motion.keystates import Keystate, KeystateKind, detect_keystates
from steerable.annotate.motion.primitives import Primitive, motion_rows, primitive_segments
from steerable.annotate.motion.snap import PAUSES_ONLY, snap_boundaries
from steerable.annotate.motion.subtasks import Granularity, heuristic_subtasks

__all__ = [
    "DimSelection",
    "Granularity",
    "Gripper",
    "Keystate",
    "KeystateKind",
    "MotionConfig",
    "PAUSES_ONLY",
    "Primitive",
    "detect_keystates",
    "find_dims",
    "heuristic_subtasks",
    "motion_rows",
    "primitive_segments",
    "snap_boundaries",
]
