"""The motion library: proprioception algorithms over one episode's numpy arrays, no model.

Dimensions by name, keystates (gripper events, pauses), motion primitives and `motion` rows,
heuristic subtasks (refined by the hand's path) and snapping boundaries onto keystates; pure,
deterministic functions taking plain parameters (`MotionParams`). Used by the `motion` and `plan`
annotation modules and by the viewer. Algorithm, thresholds and limits: docs/motion.md.
"""

from typing import TYPE_CHECKING

from steerable.lazy import lazy_exports
from steerable.motion.params import DimRef, Granularity, MotionParams, PositionKind

if TYPE_CHECKING:
    from steerable.motion.dims import DimSelection, Gripper, find_dims
    from steerable.motion.keystates import Keystate, KeystateKind, detect_keystates
    from steerable.motion.primitives import Primitive, motion_rows, primitive_segments
    from steerable.motion.snap import PAUSES_ONLY, snap_boundaries
    from steerable.motion.subtasks import heuristic_subtasks

__all__ = [
    "PAUSES_ONLY",
    "DimRef",
    "DimSelection",
    "Granularity",
    "Gripper",
    "Keystate",
    "KeystateKind",
    "MotionParams",
    "PositionKind",
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
        "Primitive": "primitives",
        "motion_rows": "primitives",
        "primitive_segments": "primitives",
        "PAUSES_ONLY": "snap",
        "snap_boundaries": "snap",
        "heuristic_subtasks": "subtasks",
    },
)
