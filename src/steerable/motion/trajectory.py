"""What the hand's path says beyond keystates: grasps that carried nothing, pushes, and set-offs.

Real teleoperation is not one clean grasp per pick. A grasp/release pair whose hand hardly moves
between the close and the open carried nothing (a missed grasp, or a re-grasp in place): it is
part of the pick that follows, not a pick and place of its own. A dip toward the table with no
gripper event in it, during which the hand travels sideways, is a push or slide: a subtask with
no gripper event at all. And a subtask ends when the hand, having risen after its gripper event,
sets off sideways toward the next one; rests, idle stretches and hesitations before that belong
to the subtask that is ending.

Pushes and set-offs need a cartesian `z` axis; without one (joint-space robots) the callers fall
back to velocity pauses. Noise-robust throughout: every signal is smoothed, and "moving" means
faster than both a share of the episode's fast speed and three times the speed noise alone shows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from steerable.motion.dims import DimSelection
from steerable.motion.keystates import Keystate
from steerable.motion.smoothing import moving_average, runs, window_frames

__all__ = ["Contact", "Trajectory"]

# "Low" for a push: below this share of the way from the lowest height to the travel height.
_LOW_RATIO = 0.35
# A rise after a gripper event counts when it is at least this share of the travel height range.
_RISE_RATIO = 0.5
# The set-off is searched once the hand has risen this share of the way to its peak.
_REACH = 0.9
# Walking back from the first fast frame stops where the speed falls under this share of the threshold.
_ONSET_BACK = 0.3
_NOISE_SIGMAS = 3.0


@dataclass(frozen=True)
class Contact:
    """A push or slide: the hand low over frames [start_index, end_index] with no gripper event."""

    start_index: int
    end_index: int


class Trajectory:
    """One episode's position signals, ready for the questions the subtask heuristic asks."""

    def __init__(
        self,
        timestamps: np.ndarray,
        state: np.ndarray,
        dims: DimSelection,
        *,
        smoothing_s: float,
        onset_speed_ratio: float,
    ) -> None:
        self.n = len(timestamps)
        raw = (
            np.asarray(state, dtype=np.float64)[:, dims.position] if dims.position else np.zeros((self.n, 0))
        )
        if dims.kind == "joint" and raw.size:
            raw = raw / _ranges(raw, dims)
        self.positions = moving_average(raw, window_frames(smoothing_s, timestamps)) if raw.size else raw
        spans = _spans(self.positions)
        self.extent = float(spans.max()) if spans.size else 0.0
        self.cartesian = dims.kind == "cartesian" and "z" in dims.axes and self.n >= 3
        if not self.cartesian:
            return
        z_axis = dims.axes.index("z")
        flat = [i for i, a in enumerate(dims.axes) if a != "z"]
        self.z = self.positions[:, z_axis]
        self.flat = self.positions[:, flat]
        self.flat_extent = float(spans[flat].max()) if flat else 0.0
        t = np.asarray(timestamps, dtype=np.float64)
        if np.any(np.diff(t) <= 0):
            t = np.arange(self.n, dtype=np.float64) * (float(np.median(np.diff(t))) or 1.0)
        self.speed = np.linalg.norm(np.gradient(self.flat, t, axis=0), axis=1)
        noise = _noise_speed(raw[:, flat], t, smoothing_s)
        self.threshold = max(
            onset_speed_ratio * float(np.percentile(self.speed, 90.0)), _NOISE_SIGMAS * noise
        )
        floor, travel = np.percentile(self.z, [1.0, 90.0])
        self.floor, self.travel = float(floor), float(travel)

    def carried(self, grasp: Keystate, release: Keystate, ratio: float) -> bool:
        """Whether the hand moved at least `ratio` of the episode's extent between close and open."""
        held = self.positions[grasp.end_index : release.start_index + 1]
        if len(held) == 0 or held.shape[1] == 0:
            return True  # nothing to judge by: keep the pair
        travel = float(np.max(np.linalg.norm(held - held[0], axis=1)))
        return travel >= ratio * self.extent

    def gap(self, release: Keystate, grasp: Keystate) -> float:
        """How far the hand is, at `grasp`, from where it opened at `release`, as a share of the extent
        (near 0 for a re-grip: the thing set down is taken again where it was left)."""
        if self.positions.shape[1] == 0 or self.extent <= 0:
            return float("inf")
        moved = self.positions[grasp.end_index] - self.positions[release.start_index]
        return float(np.linalg.norm(moved)) / self.extent

    def contacts(self, keystates: Sequence[Keystate], travel_ratio: float) -> list[Contact]:
        """Low stretches of the hand with no gripper event and at least `travel_ratio` sideways travel."""
        if not self.cartesian or self.travel - self.floor <= 1e-9 or self.flat.shape[1] == 0:
            return []
        low = self.z < self.floor + _LOW_RATIO * (self.travel - self.floor)
        events = [k for k in keystates if k.kind != "pause"]
        out = []
        for start, end, is_low in runs(low.tolist()):
            if not is_low or any(start - 2 <= k.end_index and k.start_index <= end + 1 for k in events):
                continue
            moved = float(np.linalg.norm(self.flat[end - 1] - self.flat[start]))
            if moved >= travel_ratio * self.flat_extent:
                out.append(Contact(start, end - 1))
        return out

    def set_off(self, start: int, limit: int) -> int | None:
        """The frame where the hand, risen after frame `start`, sets off sideways (before `limit`).

        None when there is no z axis, no real rise, or no sideways move before `limit`.
        """
        if not self.cartesian or limit - start < 3:
            return None
        z = self.z[start:limit]
        peak = int(np.argmax(z))
        if float(z[peak] - z[0]) < _RISE_RATIO * (self.travel - self.floor):
            return None
        risen = start + int(np.argmax(z[: peak + 1] >= z[0] + _REACH * (z[peak] - z[0])))
        fast = np.flatnonzero(self.speed[risen:limit] > self.threshold)
        if len(fast) == 0:
            return None
        j = risen + int(fast[0])
        # Back to where the move really began: the smoothed speed rises for a few frames first.
        while j > risen and _ONSET_BACK * self.threshold < self.speed[j - 1] < self.speed[j]:
            j -= 1
        return j


def _ranges(raw: np.ndarray, dims: DimSelection) -> np.ndarray:
    if dims.position_range is not None:
        ranges = np.asarray(dims.position_range, dtype=np.float64)
    else:
        low, high = np.percentile(raw, [1.0, 99.0], axis=0)
        ranges = high - low
    return np.maximum(ranges, 1e-9)


def _spans(positions: np.ndarray) -> np.ndarray:
    """Per dim, the 1st-99th percentile range (robust to a stray sample)."""
    if positions.size == 0:
        return np.zeros(positions.shape[1] if positions.ndim == 2 else 0)
    low, high = np.percentile(positions, [1.0, 99.0], axis=0)
    return np.asarray(high - low, dtype=np.float64)


def _noise_speed(raw: np.ndarray, t: np.ndarray, smoothing_s: float) -> float:
    """About the speed sensor noise alone shows after smoothing: a robust per-sample noise level
    (from second differences, which cancel smooth motion) over the smoothing window's span."""
    if len(raw) < 4 or raw.shape[1] == 0:
        return 0.0
    sigma = 1.4826 * float(np.median(np.abs(np.diff(raw, n=2, axis=0)))) / np.sqrt(6.0)
    period = float(np.median(np.diff(t))) or 1.0
    frames = max(1, int(round(smoothing_s / period)) | 1)
    return float(sigma * np.sqrt(raw.shape[1]) / (frames * period))
