"""The `motion` module: the no-model motion annotator.

Keystates, motion primitives and heuristic subtasks from proprioception: the module reads the
frames, runs the motion library (`steerable.motion`: pure functions over numpy arrays of one
episode) on them and the engine writes the rows. Algorithm, thresholds and limits: docs/motion.md.
"""

from typing import TYPE_CHECKING

from steerable.annotate.modules.motion.config import MotionConfig
from steerable.annotate.modules.motion.stage import MotionStage
from steerable.lazy import lazy_exports

if TYPE_CHECKING:
    from steerable.annotate.modules.motion.module import MotionModule

__all__ = ["MotionConfig", "MotionModule", "MotionStage"]

__getattr__ = lazy_exports(__name__, {"MotionModule": "module"})
