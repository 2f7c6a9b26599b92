"""Keystates from proprioception: gripper close/open events and velocity pauses.

Gripper events use a swing detector with hysteresis on the normalised closure signal (0 = open,
1 = closed), so sensor noise and a gripper stalled on an object never produce spurious events.
A pause is a stretch where the smoothed end-effector (or joint) speed stays low, from a long hold
down to the brief stop between two deliberate moves; its keystate sits on the last still frame,
just before motion resumes: the natural start of whatever the robot does next.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from steerable.motion.dims import DimSelection, Gripper
from steerable.motion.params import MotionParams
from steerable.motion.smoothing import (
    as_matrix,
    frame_period,
    moving_average,
    runs,
    window_frames,
)
from steerable.motion.speed import position_speed, still_mask

__all__ = ["Keystate", "KeystateKind", "closure_signal", "detect_keystates"]

KeystateKind = Literal["gripper_close", "gripper_open", "pause"]
# A swing starts and ends where the signal is within this fraction of the swing from its extremes.
_SWING_EDGE = 0.1
# A gripper whose range is under this many noise sigmas never moved on purpose.
_MIN_RANGE_SIGMAS = 10.0
# A pause this long has strength 0.5; a one-frame dip between two moves is weak, a long hold strong.
_PAUSE_STRENGTH_S = 0.5


@dataclass(frozen=True)
class Keystate:
    """A moment where the robot's state changes meaningfully.

    `time` is the stored timestamp of frame `frame_index`; `start_index`/`end_index` bound the
    underlying change (the closing swing, or the still stretch), `strength` is in [0, 1].
    """

    time: float
    frame_index: int
    kind: KeystateKind
    strength: float
    start_index: int
    end_index: int
    source: str | None = None
    """The gripper's name for gripper events; None for pauses."""


def detect_keystates(
    timestamps: np.ndarray, state: np.ndarray, dims: DimSelection, params: MotionParams
) -> list[Keystate]:
    """All keystates of one episode, sorted by frame; pauses that overlap a gripper event are dropped."""
    timestamps = np.asarray(timestamps)
    if len(timestamps) == 0:
        return []
    state = as_matrix(state)
    events: list[Keystate] = []
    for gripper in dims.grippers:
        events += _gripper_events(timestamps, state, gripper, params)
    busy = [(k.start_index, k.end_index) for k in events]
    for pause in _pauses(timestamps, state, dims, params):
        if not any(pause.start_index <= end and start <= pause.end_index for start, end in busy):
            events.append(pause)
    return sorted(events, key=lambda k: (k.frame_index, k.kind, k.source or ""))


def closure_signal(
    timestamps: np.ndarray, state: np.ndarray, gripper: Gripper, params: MotionParams
) -> np.ndarray | None:
    """The smoothed gripper signal scaled to 0 = open .. 1 = closed; None when it never really moves."""
    raw = state[:, gripper.dims].mean(axis=1)
    smooth = moving_average(raw, window_frames(params.smoothing_s, timestamps))
    if gripper.low is not None and gripper.high is not None and gripper.high > gripper.low:
        low, high = gripper.low, gripper.high
    else:
        low, high = (float(v) for v in np.percentile(smooth, [1.0, 99.0]))
        # Per-frame noise from the step sizes: a still gripper's steps are noise only.
        sigma = 1.4826 * float(np.median(np.abs(np.diff(raw)))) / np.sqrt(2.0) if len(raw) > 1 else 0.0
        if high - low <= max(1e-9, _MIN_RANGE_SIGMAS * sigma):
            return None
    closure = np.clip((smooth - low) / (high - low), 0.0, 1.0)
    return closure if gripper.closed_is_high else 1.0 - closure


def _swings(closure: np.ndarray, hysteresis: float) -> list[tuple[int, int]]:
    """(start extreme, end extreme) frame pairs of every swing larger than `hysteresis`."""
    turns: list[int] = []
    lo = hi = 0
    rising: bool | None = None
    for i, value in enumerate(closure):
        if value < closure[lo]:
            lo = i
        if value > closure[hi]:
            hi = i
        if rising is not False and value <= closure[hi] - hysteresis:
            turns.append(hi)
            rising, lo = False, i
        elif rising is not True and value >= closure[lo] + hysteresis:
            turns.append(lo)
            rising, hi = True, i
    last = hi if rising else lo
    if rising is not None and abs(closure[last] - closure[turns[-1]]) >= hysteresis:
        turns.append(last)
    return list(zip(turns[:-1], turns[1:], strict=True))


def _gripper_events(
    timestamps: np.ndarray, state: np.ndarray, gripper: Gripper, params: MotionParams
) -> list[Keystate]:
    closure = closure_signal(timestamps, state, gripper, params)
    if closure is None:
        return []
    out = []
    for a, b in _swings(closure, params.gripper_hysteresis):
        start_level, end_level = float(closure[a]), float(closure[b])
        swing = end_level - start_level
        part = (closure[a : b + 1] - start_level) / swing  # 0 at the start extreme, 1 at the end one
        mid = a + int(np.argmax(part >= 0.5))
        onset = a + int(np.flatnonzero(part[: mid - a + 1] <= _SWING_EDGE)[-1])
        end = mid + int(np.argmax(part[mid - a :] >= 1.0 - _SWING_EDGE))
        kind: KeystateKind = "gripper_close" if swing > 0 else "gripper_open"
        strength = min(1.0, abs(swing))
        out.append(Keystate(float(timestamps[mid]), mid, kind, strength, onset, end, gripper.name))
    return out


def _pauses(
    timestamps: np.ndarray, state: np.ndarray, dims: DimSelection, params: MotionParams
) -> list[Keystate]:
    if not dims.position or len(timestamps) < 2:
        return []
    still = still_mask(position_speed(timestamps, state, dims, params), dims, params)
    period = frame_period(timestamps)
    out = []
    for start, end, is_still in runs(still.tolist()):
        # Stillness at the very start or end is idling, not a transition between two motions.
        if not is_still or start == 0 or end == len(still):
            continue
        duration = (end - start) * period
        if duration < params.min_pause_s:
            continue
        strength = duration / (duration + _PAUSE_STRENGTH_S)
        out.append(Keystate(float(timestamps[end - 1]), end - 1, "pause", strength, start, end - 1))
    return out
