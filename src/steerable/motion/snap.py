"""Moving VLM subtask boundaries onto nearby keystates (`--plan.snap_to_keystates`).

A model reading contact sheets sees the world at about 2 fps, so its boundaries are late or early
by a fraction of a second; proprioception knows the exact frame the gripper closed or the arm
stopped. Snapping trusts the model for *which* change happened and the keystate for *when*.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

import numpy as np

from steerable.motion.keystates import Keystate, KeystateKind

__all__ = ["PAUSES_ONLY", "snap_boundaries"]

PAUSES_ONLY: tuple[KeystateKind, ...] = ("pause",)


def _nearest_frame(frame_timestamps: np.ndarray, t: float) -> int:
    """Index of the frame whose stored timestamp is closest to `t` (the earlier one on a tie)."""
    i = int(np.searchsorted(frame_timestamps, t))
    if i == 0:
        return 0
    if i == len(frame_timestamps):
        return i - 1
    return i - 1 if t - frame_timestamps[i - 1] <= frame_timestamps[i] - t else i


def snap_boundaries(
    boundaries: Sequence[float],
    keystates: Sequence[Keystate],
    tolerance_s: float,
    frame_timestamps: np.ndarray,
    *,
    kinds: Collection[KeystateKind] = PAUSES_ONLY,
) -> list[float]:
    """Each boundary moved to the nearest keystate of `kinds` within `tolerance_s`, else to its nearest frame.

    Boundaries are the interior cut points of one episode. The result is sorted, lies on stored
    frame timestamps, and never puts two boundaries on one frame (a later boundary that would
    collide takes the next free frame), unless there are more boundaries than frames.
    """
    ts = np.asarray(frame_timestamps, dtype=np.float64)
    if len(ts) == 0:
        return []
    key_frames = sorted({_nearest_frame(ts, k.time) for k in keystates if k.kind in kinds})
    out: list[float] = []
    previous = -1
    for b in sorted(float(x) for x in boundaries):
        near = [f for f in key_frames if f > previous and abs(ts[f] - b) <= tolerance_s]
        frame = min(near, key=lambda f: (abs(ts[f] - b), f)) if near else max(_nearest_frame(ts, b), previous + 1)
        frame = min(frame, len(ts) - 1)
        out.append(float(frame_timestamps[frame]))
        previous = frame
    return out
