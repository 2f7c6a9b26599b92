"""Finding the gripper and the end-effector or joint dimensions of a dataset from feature names.

Names are the only portable description LeRobot datasets carry, so the rules here are token
matches on them (documented in docs/motion.md); every choice can be overridden by a parameter
(`MotionParams`), and anything missing becomes a note for the run summary rather than an error.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from steerable.dataset.frames import (
    ACTION_KEYS,
    STATE_KEYS,
    float_vectors,
    is_float_vector,
    pick_feature,
    vector_names,
)
from steerable.errors import ConfigError
from steerable.motion.params import DimRef, MotionParams

__all__ = ["DimSelection", "Gripper", "find_dims", "joint_group", "name_tokens"]

# A name with one of these tokens is a gripper whatever else it says.
STRONG_GRIPPER = frozenset(["gripper", "grip", "grasp", "claw", "pincer", "jaw"])
# Hands and fingers are grippers only when a side has at most two such dims; more is a dexterous hand.
WEAK_GRIPPER = frozenset(["hand", "finger", "fingers"])
MAX_WEAK_DIMS = 2
# Signals that are not positions, so never a gripper opening or a position dim.
NOT_POSITION = frozenset(
    ["vel", "velocity", "speed", "force", "torque", "effort", "current", "acc", "temperature", "temp"]
)
ROTATION = frozenset(
    ["rot", "rotation", "quat", "quaternion", "orientation", "ori", "euler", "aa"]
) | frozenset(["roll", "pitch", "yaw", "rx", "ry", "rz", "qx", "qy", "qz", "qw"])
CLOSED_HIGH = frozenset(["close", "closed", "closure", "closedness", "closing"])
UNIT_TOKENS = frozenset(
    ["pos", "position", "angle", "rad", "deg", "q", "qpos", "val", "value", "joint", "joints", "motor"]
)
SIDES = ("left", "right")
AXES = ("x", "y", "z")


@dataclass(frozen=True)
class Gripper:
    """One gripper: its display name, the dims averaged into its signal, polarity and dataset range."""

    name: str
    dims: list[int]
    closed_is_high: bool
    low: float | None = None
    """Dataset-wide low end of the signal (from meta/stats.json); None: use the episode's own range."""
    high: float | None = None


@dataclass(frozen=True)
class DimSelection:
    """What the motion library reads from one vector feature, and why (notes)."""

    state_key: str | None
    grippers: list[Gripper] = field(default_factory=list)
    position: list[int] = field(default_factory=list)
    position_names: list[str] = field(default_factory=list)
    kind: Literal["cartesian", "joint", "none"] = "none"
    axes: list[str] = field(default_factory=list)
    """Cartesian only: the axis ("x", "y" or "z") of each position dim."""
    groups: list[str] = field(default_factory=list)
    """Joint only: the body-part group ("left arm", "shoulder") of each position dim."""
    position_range: list[float] | None = None
    """Dataset-wide range of each position dim (from meta/stats.json); None when unknown."""
    notes: list[str] = field(default_factory=list)

    @property
    def gripper(self) -> list[int]:
        """Every gripper dim, in feature order."""
        return sorted(i for g in self.grippers for i in g.dims)


def name_tokens(name: str) -> list[str]:
    """Lower-case word tokens of a dim name: "left_hand.joint_3.pos" -> [left, hand, joint, 3, pos]."""
    return [t for t in re.split(r"[^a-z0-9]+", name.lower()) if t]


def find_dims(
    features: dict[str, dict[str, Any]], params: MotionParams, stats: dict[str, dict[str, Any]] | None = None
) -> DimSelection:
    """Pick the feature and its gripper and position dims by name, honouring the overrides in `params`.

    `stats` is meta/stats.json; when given, gripper and speed thresholds use the dataset-wide ranges,
    so an episode where the gripper barely moves is not stretched into full open/close swings.

    Raises:
        ConfigError: an override names a feature or dimension the dataset does not have.
    """
    key = _pick_feature(features, params)
    if key is None:
        return DimSelection(None, notes=["no float vector feature (state or action): no motion rows"])
    feature = features[key]
    names = vector_names(feature, _width(feature))
    low, high = _ranges((stats or {}).get(key), len(names))
    notes: list[str] = []
    if params.gripper_dims is not None:
        gripper_idx = _resolve(params.gripper_dims, names, key, "gripper_dims")
    else:
        gripper_idx = _auto_grippers(names, notes)
    grippers = _group_grippers(gripper_idx, names, params, low, high)
    if not grippers:
        notes.append(f"no gripper dimension in {key!r}: no gripper events (set --motion.gripper_dims)")
    position, axes = _position(names, {i for g in grippers for i in g.dims}, key, params)
    pos_names = [names[i] for i in position]
    ranges = [high[i] - low[i] for i in position] if low and high else None
    if not position:
        notes.append(f"no position dimension in {key!r}: motion rows hold gripper events only")
        return DimSelection(key, grippers, notes=notes)
    if axes is not None:
        return DimSelection(
            key, grippers, position, pos_names, "cartesian", axes=axes, position_range=ranges, notes=notes
        )
    if params.position_kind == "auto":
        notes.append(f"no end-effector x/y/z names in {key!r}: describing motion by joint groups")
    groups = [joint_group(n) for n in pos_names]
    return DimSelection(
        key, grippers, position, pos_names, "joint", groups=groups, position_range=ranges, notes=notes
    )


def _position(
    names: list[str], taken: set[int], key: str, params: MotionParams
) -> tuple[list[int], list[str] | None]:
    """Position dims and, when they are cartesian, their axes."""
    if params.position_dims is None:
        if params.position_kind != "joint":
            position, axes = _auto_cartesian(names, taken)
            if axes is not None:
                return position, axes
        return _joint_dims(names, taken), None
    position = _resolve(params.position_dims, names, key, "position_dims")
    if params.position_kind == "joint":
        return position, None
    axes = _axes_of(position, names)
    if axes is None and params.position_kind == "cartesian":
        if len(position) > len(AXES):
            raise ConfigError("--motion.position_dims: a cartesian position takes at most 3 dims (x, y, z)")
        axes = list(AXES[: len(position)])
    return position, axes


def _ranges(entry: dict[str, Any] | None, width: int) -> tuple[list[float] | None, list[float] | None]:
    # Robust quantiles when the stats carry them (LeRobot >= 3 writes q01/q99), else min/max.
    if not isinstance(entry, dict):
        return None, None
    for lo_key, hi_key in (("q01", "q99"), ("min", "max")):
        lo, hi = entry.get(lo_key), entry.get(hi_key)
        if isinstance(lo, list) and isinstance(hi, list) and len(lo) == len(hi) == width:
            return [float(v) for v in lo], [float(v) for v in hi]
    return None, None


def joint_group(name: str) -> str:
    """The body part a joint belongs to: "left.joint_1.pos" -> "left arm", "shoulder_pan.pos" -> "shoulder"."""
    tokens = [t for t in name_tokens(name) if t not in UNIT_TOKENS and not re.fullmatch(r"[a-z]?\d+", t)]
    if not tokens:
        return "arm"
    if tokens[0] in SIDES:
        return f"{tokens[0]} {tokens[1]}" if len(tokens) > 1 else f"{tokens[0]} arm"
    return tokens[0]


def _width(feature: dict[str, Any]) -> int:
    shape = feature.get("shape") or [1]
    return int(shape[0]) if len(shape) == 1 else 0


def _pick_feature(features: dict[str, dict[str, Any]], params: MotionParams) -> str | None:
    for explicit, label in ((params.state_key, "state_key"), (params.action_key, "action_key")):
        if explicit is not None:
            if explicit not in features or not is_float_vector(features[explicit]):
                raise ConfigError(
                    f"--motion.{label}: {explicit!r} is not a float vector feature (have {float_vectors(features)})"
                )
            return explicit
    key = pick_feature(features, (*STATE_KEYS, *ACTION_KEYS))
    if key is not None:
        return key
    skip = {"timestamp"}
    return next((k for k, f in features.items() if k not in skip and is_float_vector(f)), None)


def _resolve(refs: Sequence[DimRef], names: list[str], key: str, label: str) -> list[int]:
    out = []
    for ref in refs:
        if isinstance(ref, int):
            if ref >= len(names):
                raise ConfigError(
                    f"--motion.{label}: index {ref} is out of range for {key!r} ({len(names)} dims)"
                )
            out.append(ref)
        elif ref in names:
            out.append(names.index(ref))
        else:
            raise ConfigError(f"--motion.{label}: {ref!r} is not a dimension of {key!r} (names: {names})")
    return out


def _side(tokens: list[str]) -> str | None:
    return next((t for t in tokens if t in SIDES), None)


def _auto_grippers(names: list[str], notes: list[str]) -> list[int]:
    strong: list[int] = []
    weak_by_side: dict[str | None, list[int]] = {}
    for i, name in enumerate(names):
        tokens = set(name_tokens(name))
        if tokens & NOT_POSITION:
            continue
        if tokens & STRONG_GRIPPER:
            strong.append(i)
        elif tokens & WEAK_GRIPPER:
            weak_by_side.setdefault(_side(name_tokens(name)), []).append(i)
    chosen = list(strong)
    for side, dims in weak_by_side.items():
        if len(dims) <= MAX_WEAK_DIMS:
            chosen += dims
        else:
            where = f"{side} hand" if side else "hand"
            notes.append(
                f"{where} has {len(dims)} joint dims (a dexterous hand): not used as an open/close gripper"
            )
    return sorted(chosen)


def _group_grippers(
    dims: list[int], names: list[str], params: MotionParams, low: list[float] | None, high: list[float] | None
) -> list[Gripper]:
    # Two dims on the same side (e.g. two finger joints) are one gripper: their signals are averaged.
    by_side: dict[str | None, list[int]] = {}
    for i in dims:
        by_side.setdefault(_side(name_tokens(names[i])), []).append(i)
    out = []
    for side, idx in by_side.items():
        closed_high = params.gripper_closed_is_high
        if closed_high is None:
            closed_high = any(set(name_tokens(names[i])) & CLOSED_HIGH for i in idx)
        lo = float(sum(low[i] for i in idx) / len(idx)) if low else None
        hi = float(sum(high[i] for i in idx) / len(idx)) if high else None
        out.append(Gripper(f"{side} gripper" if side else "gripper", idx, closed_high, lo, hi))
    return out


def _axis(name: str) -> tuple[str, str] | None:
    tokens = name_tokens(name)
    if not tokens or tokens[-1] not in AXES or set(tokens) & (ROTATION | NOT_POSITION):
        return None
    return " ".join(tokens[:-1]), tokens[-1]


def _axes_of(dims: list[int], names: list[str]) -> list[str] | None:
    axes = [_axis(names[i]) for i in dims]
    if any(a is None for a in axes) or len({a[1] for a in axes if a}) != len(axes):
        return None
    return [a[1] for a in axes if a]


def _auto_cartesian(names: list[str], taken: set[int]) -> tuple[list[int], list[str] | None]:
    groups: dict[str, dict[str, int]] = {}
    for i, name in enumerate(names):
        parsed = _axis(name)
        if parsed is not None and i not in taken:
            groups.setdefault(parsed[0], {}).setdefault(parsed[1], i)
    for axes in groups.values():
        if len(axes) >= 2:
            order = [a for a in AXES if a in axes]
            return [axes[a] for a in order], order
    return [], None


def _joint_dims(names: list[str], taken: set[int]) -> list[int]:
    return [i for i, n in enumerate(names) if i not in taken and not set(name_tokens(n)) & NOT_POSITION]
