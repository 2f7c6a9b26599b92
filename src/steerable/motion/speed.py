"""How fast the arm moves: position signals in comparable units, their velocity, and stillness.

Cartesian positions share one unit (metres), so they are used as they are. Joint positions do
not (arm joints in degrees beside hand joints in 0..255 motor counts), so each joint is divided
by its range first; otherwise the noisiest unit would decide what "moving" means.
"""

from __future__ import annotations

import numpy as np

from steerable.motion.dims import DimSelection
from steerable.motion.params import MotionParams
from steerable.motion.smoothing import moving_average, velocity, window_frames

__all__ = ["position_speed", "position_velocity", "still_mask"]

# The pause speed never drops below this fraction of the workspace size per second (needs stats).
_PAUSE_FLOOR = 0.01
_SPEED_PERCENTILE = 90.0
# Without dataset stats a joint's range is taken from the episode, but never under this fraction of
# the widest joint's range, so a joint that only jitters is not blown up to full scale.
_MIN_RANGE_FRACTION = 0.1


def _scales(state: np.ndarray, dims: DimSelection) -> np.ndarray:
    if dims.position_range is not None:
        ranges = np.asarray(dims.position_range, dtype=np.float64)
    else:
        low, high = np.percentile(state[:, dims.position], [1.0, 99.0], axis=0)
        ranges = high - low
    widest = float(ranges.max()) if ranges.size else 0.0
    return np.maximum(ranges, max(_MIN_RANGE_FRACTION * widest, 1e-9))


def position_velocity(
    timestamps: np.ndarray, state: np.ndarray, dims: DimSelection, params: MotionParams
) -> np.ndarray:
    """(frames, position dims) smoothed velocity; joints in fractions of their range per second."""
    positions = state[:, dims.position]
    if dims.kind == "joint":
        positions = positions / _scales(state, dims)
    smooth = moving_average(positions, window_frames(params.smoothing_s, timestamps))
    return velocity(timestamps, smooth)


def position_speed(
    timestamps: np.ndarray, state: np.ndarray, dims: DimSelection, params: MotionParams
) -> np.ndarray:
    """Smoothed speed of the position dims (zeros without position dims)."""
    if not dims.position:
        return np.zeros(len(timestamps))
    return np.asarray(np.linalg.norm(position_velocity(timestamps, state, dims, params), axis=1))


def still_mask(speed: np.ndarray, dims: DimSelection, params: MotionParams) -> np.ndarray:
    """Frames slower than the pause speed: `pause_speed`, else a fraction of the episode's fast speed."""
    if params.pause_speed is not None:
        return speed < params.pause_speed
    # With dataset stats, an episode that hardly moves is still throughout instead of half noise.
    floor = 0.0
    if dims.position_range is not None:
        workspace = (
            np.linalg.norm(dims.position_range) if dims.kind == "cartesian" else np.sqrt(len(dims.position))
        )
        floor = _PAUSE_FLOOR * float(workspace)
    fast = float(np.percentile(speed, _SPEED_PERCENTILE)) if len(speed) else 0.0
    return speed < max(params.pause_speed_ratio * fast, floor, 1e-12)
