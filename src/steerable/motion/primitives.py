"""ECoT-style motion primitives ("move left and down", "close gripper", "lift") and `motion` rows.

Each frame gets a label from the proprioception alone; labels are then debounced so that no
primitive is shorter than `min_primitive_s` (gripper events are kept whatever their length), and
a row is emitted wherever the label changes. Directions are in the robot's base frame: +x forward,
+y left, +z up (REP 103); the `flip_*` parameters adapt robots that use another convention.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from steerable.motion.debounce import Segment, debounce
from steerable.motion.dims import DimSelection
from steerable.motion.keystates import Keystate, detect_keystates
from steerable.motion.params import MotionParams
from steerable.motion.smoothing import as_matrix, frame_period
from steerable.motion.speed import position_velocity, still_mask

__all__ = ["Primitive", "motion_rows", "primitive_segments"]

HOLD = "hold still"
LIFT = "lift"
# Words for the positive and negative direction of each axis.
_AXIS_WORDS = {"x": ("forward", "back"), "y": ("left", "right"), "z": ("up", "down")}


@dataclass(frozen=True)
class Primitive:
    """One primitive over frames [start_index, end_index)."""

    start_index: int
    end_index: int
    text: str


def motion_rows(
    timestamps: np.ndarray,
    state: np.ndarray,
    dims: DimSelection,
    params: MotionParams,
    *,
    keystates: list[Keystate] | None = None,
) -> list[dict[str, Any]]:
    """Persistent `motion` rows, one where the primitive changes, on the frames' stored timestamps.

    Pass `keystates` when they were already detected for this episode to skip detecting them again.
    """
    return [
        {
            "role": "assistant",
            "content": p.text,
            "style": "motion",
            "timestamp": float(timestamps[p.start_index]),
            "camera": None,
            "tool_calls": None,
        }
        for p in primitive_segments(timestamps, state, dims, params, keystates=keystates)
    ]


def primitive_segments(
    timestamps: np.ndarray,
    state: np.ndarray,
    dims: DimSelection,
    params: MotionParams,
    *,
    keystates: list[Keystate] | None = None,
) -> list[Primitive]:
    """The debounced primitives of one episode, in frame order (deterministic)."""
    timestamps = np.asarray(timestamps)
    if len(timestamps) == 0:
        return []
    state = as_matrix(state)
    if keystates is None:
        keystates = detect_keystates(timestamps, state, dims, params)
    labels = _frame_labels(timestamps, state, dims, params)
    gripper = np.zeros(len(labels), dtype=bool)
    for k in keystates:
        if k.kind != "pause":
            verb = "close" if k.kind == "gripper_close" else "open"
            for i in range(k.start_index, k.end_index + 1):
                labels[i] = f"{verb} {k.source or 'gripper'}"
            gripper[k.start_index : k.end_index + 1] = True
    min_frames = params.min_primitive_s / frame_period(timestamps)
    segments = debounce(labels, gripper.tolist(), min_frames)
    segments = _lift(segments, timestamps, params.lift_window_s)
    return [Primitive(s, e, text) for s, e, text in _merge_equal(segments) if text is not None]


def _phrase(words: list[str]) -> str:
    if len(words) <= 1:
        return "".join(words)
    return ", ".join(words[:-1]) + " and " + words[-1]


def _frame_labels(
    timestamps: np.ndarray, state: np.ndarray, dims: DimSelection, params: MotionParams
) -> list[str | None]:
    """Per-frame motion label; None where nothing is known (no position dims)."""
    if not dims.position:
        return [None] * len(timestamps)
    vel = position_velocity(timestamps, state, dims, params)
    still = still_mask(np.linalg.norm(vel, axis=1), dims, params)
    if dims.kind == "cartesian":
        flips = {"x": params.flip_x, "y": params.flip_y, "z": params.flip_z}
        signs = np.array([-1.0 if flips[a] else 1.0 for a in dims.axes])
        parts, names = vel * signs, list(dims.axes)
    else:
        groups = list(dict.fromkeys(dims.groups))
        parts = np.stack(
            [
                np.linalg.norm(vel[:, [i for i, g in enumerate(dims.groups) if g == name]], axis=1)
                for name in groups
            ],
            axis=1,
        )
        names = groups
    labels: list[str | None] = []
    for i in range(len(timestamps)):
        if still[i]:
            labels.append(HOLD)
            continue
        size = np.abs(parts[i])
        active = [j for j in _ordered(names, dims.kind) if size[j] >= params.direction_ratio * size.max()]
        if dims.kind == "cartesian":
            words = [_AXIS_WORDS[names[j]][0 if parts[i, j] > 0 else 1] for j in active]
        else:
            words = [names[j] for j in active]
        labels.append("move " + _phrase(words))
    return labels


def _ordered(names: list[str], kind: str) -> list[int]:
    # Cartesian words read forward/back, left/right, up/down; joint groups keep feature order.
    if kind == "cartesian":
        return sorted(range(len(names)), key=lambda j: "xyz".index(names[j]))
    return list(range(len(names)))


def _lift(segments: list[Segment], timestamps: np.ndarray, window_s: float) -> list[Segment]:
    """Call the first upward move right after a gripper closes "lift"."""
    out = list(segments)
    for i, (_, end, text) in enumerate(segments):
        if text is None or not text.startswith("close"):
            continue
        closed_at = float(timestamps[end - 1])
        for j in range(i + 1, len(out)):
            start, stop, label = out[j]
            if label == HOLD:
                continue
            if label is not None and "up" in label.split() and timestamps[start] - closed_at <= window_s:
                out[j] = (start, stop, LIFT)
            break
    return out


def _merge_equal(segments: list[Segment]) -> list[Segment]:
    out: list[Segment] = []
    for s, e, text in segments:
        if out and out[-1][2] == text:
            out[-1] = (out[-1][0], e, text)
        else:
            out.append((s, e, text))
    return out
