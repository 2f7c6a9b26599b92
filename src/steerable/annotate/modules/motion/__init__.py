"""The `motion` module: the no-model motion annotator.

Keystates, motion primitives and heuristic subtasks from proprioception: pure functions over numpy
arrays of one episode; the module reads the frames and the engine writes the rows. Algorithm,
thresholds and limits: docs/motion.md.
"""

from typing import TYPE_CHECKING

from steerable.annotate.modules.motion.config import Granularity, MotionConfig
from steerable.annotate.modules.motion.stage import MotionStage
from steerable.lazy import lazy_exports

if TYPE_CHECKING:
    from steerable.annotate.modules.motion.dims import DimSelection, Gripper, find_dims
    from steerable.annotate.modules.motion.keystates import Keystate, KeystateKind, detect_keystates
    from steerable.annotate.modules.motion.module import MotionModule
    from steerable.annotate.modules.motion.primitives import Primitive, motion_rows, primitive_segments
    from steerable.annotate.modules.motion.snap import PAUSES_ONLY, snap_boundaries
    from steerable.annotate.modules.motion.subtasks import heuristic_subtasks

__all__ = [
    "PAUSES_ONLY",
    "DimSelection",
    "Granularity",
    "Gripper",
    "Keystate",
    "KeystateKind",
    "MotionConfig",
    "MotionModule",
    "MotionStage",
    "Primitive",
    "detect_keystates",
    "find_dims",
    "heuristic_subtasks",
    "motion_rows",
    "primitive_segments",
    "snap_boundaries",
]

__getattr__ = lazy_exports(
    __name__,
    {
        "DimSelection": "dims",
        "Gripper": "dims",
        "find_dims": "dims",
        "Keystate": "keystates",
        "KeystateKind": "keystates",
        "detect_keystates": "keystates",
        "MotionModule": "module",
        "Primitive": "primitives",
        "motion_rows": "primitives",
        "primitive_segments": "primitives",
        "PAUSES_ONLY": "snap",
        "snap_boundaries": "snap",
        "heuristic_subtasks": "subtasks",
    },
)
