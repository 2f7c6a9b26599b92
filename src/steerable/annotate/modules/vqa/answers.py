"""VQA answers: shape checks per question type, and coordinates brought to one stored convention.

Stored convention: coordinates are integer pixels of the original camera frame, x to the right
from the left edge, y down from the top edge, both within [0, width] x [0, height]. Boxes are
`[x0, y0, x1, y1]` with x0 <= x1 and y0 <= y1 (`bbox_format` "xyxy"), points `[x, y]`
(`point_format` "xy"). Models write other scales: Qwen2-VL, Qwen3-VL and Gemini use 0-1000 relative
coordinates, some use 0-1 fractions, Qwen2.5-VL uses pixels; `read_coordinates` converts.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from steerable.annotate.modules.vqa.config import QUESTION_TYPES, CoordinateFormat, QuestionType
from steerable.annotate.modules.vqa.replies import RELATIONS, required_keys
from steerable.errors import with_article

__all__ = [
    "RELATIONS",
    "CheckedAnswer",
    "answer_type",
    "camera_frame_sizes",
    "check_answer",
    "detect_coordinate_format",
]

# Required keys of each answer shape come from its reply model; these optional ones are the format
# tags a stored answer may carry.
_STORED_TAGS: dict[QuestionType, frozenset[str]] = {"keypoint": frozenset({"point_format"})}


def _shape(qtype: QuestionType) -> tuple[frozenset[str], frozenset[str]]:
    return required_keys(qtype), _STORED_TAGS.get(qtype, frozenset())


_EPS = 1e-6


@dataclass(frozen=True)
class CheckedAnswer:
    """An answer in stored form, or why it was refused; `coordinates` is the scale it was read in."""

    answer: dict[str, Any] | None
    problem: str | None = None
    coordinates: str | None = None


class _Refused(Exception):
    """Internal: the answer cannot be stored; the message says why."""


def answer_type(answer: Any) -> QuestionType | None:
    """The question type whose answer shape `answer` has (its keys, not its values), or None."""
    if not isinstance(answer, Mapping):
        return None
    keys = set(answer)
    for qtype in QUESTION_TYPES:
        required, optional = _shape(qtype)
        if required <= keys <= required | optional:
            return qtype
    return None


def camera_frame_sizes(features: Mapping[str, Mapping[str, Any]]) -> dict[str, tuple[int, int]]:
    """(width, height) of every video feature, from its `info` or its [height, width, channels] shape."""
    sizes: dict[str, tuple[int, int]] = {}
    for key, feature in features.items():
        if feature.get("dtype") != "video":
            continue
        info = feature.get("info") or {}
        if "video.width" in info and "video.height" in info:
            sizes[key] = (int(info["video.width"]), int(info["video.height"]))
            continue
        names = list(feature.get("names") or ["height", "width", "channels"])
        shape = list(feature.get("shape") or [])
        if "width" in names and "height" in names and len(shape) == len(names):
            sizes[key] = (int(shape[names.index("width")]), int(shape[names.index("height")]))
    return sizes


def detect_coordinate_format(
    xs: Sequence[float], ys: Sequence[float], width: int, height: int, ambiguous_as: str
) -> str:
    """Auto mode: the scale the numbers must be in, or `ambiguous_as` when they fit several.

    Values above 1000 cannot be 0-1000 relative, so they are pixels; values above the frame size
    (but at most 1000) cannot be pixels, so they are relative; all values within 0-1 with a fraction
    among them are 0-1 fractions (a box or point inside the first pixel means nothing). Anything else
    fits both pixels and relative scales, and takes `ambiguous_as`, which should be the scale the
    prompt asked for.
    """
    values = [*xs, *ys]
    if any(v > 1000 + _EPS for v in values):
        return "pixels"
    if any(x > width + _EPS for x in xs) or any(y > height + _EPS for y in ys):
        return "relative_1000"
    if values and all(0 <= v <= 1 for v in values) and any(v != int(v) for v in values):
        return "normalized_0_1"
    return ambiguous_as


def _to_pixels(value: float, scale: str, size: int) -> float:
    if scale == "relative_1000":
        return value * size / 1000.0
    if scale == "normalized_0_1":
        return value * size
    return value


def _number(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise _Refused(f"{what} must be a finite number, got {value!r}")
    return float(value)


def _text(answer: Mapping[str, Any], key: str) -> str:
    value = answer.get(key)
    if not isinstance(value, str) or not value.strip():
        raise _Refused(f"{key!r} must be a non-empty string, got {value!r}")
    return value.strip()


def _pair_list(value: Any, count: int, what: str) -> list[float]:
    if not isinstance(value, list) or len(value) != count:
        raise _Refused(f"{what} must be a list of {count} numbers, got {value!r}")
    return [_number(v, what) for v in value]


class _Frame:
    """Converts one answer's coordinates to pixels and applies the out-of-range rule."""

    def __init__(self, width: int, height: int, scale: str, out_of_range: str) -> None:
        self.width, self.height, self.scale, self.out_of_range = width, height, scale, out_of_range

    def place(self, value: float, axis: str) -> int:
        size = self.width if axis == "x" else self.height
        pixel = _to_pixels(value, self.scale, size)
        if pixel < -_EPS or pixel > size + _EPS:
            if self.out_of_range == "reject":
                raise _Refused(
                    f"{axis}={value:g} ({self.scale}) is outside the {self.width}x{self.height} frame"
                )
            pixel = min(max(pixel, 0.0), float(size))
        return int(round(pixel))


def _points(qtype: QuestionType, answer: Mapping[str, Any]) -> list[list[float]]:
    """The raw [x, y, ...] lists of an answer: one box per detection, or the single point."""
    if qtype == "keypoint":
        if answer.get("point_format", "xy") != "xy":
            raise _Refused(f"only xy points are read, got point_format={answer['point_format']!r}")
        return [_pair_list(answer["point"], 2, "point")]
    detections = answer["detections"]
    if not isinstance(detections, list) or not detections:
        raise _Refused(f"'detections' must be a non-empty list, got {detections!r}")
    boxes = []
    for d in detections:
        if (
            not isinstance(d, Mapping)
            or not {"label", "bbox"} <= set(d)
            or set(d) - {"label", "bbox", "bbox_format"}
        ):
            raise _Refused(f"each detection must be {{'label': ..., 'bbox': [x0, y0, x1, y1]}}, got {d!r}")
        if d.get("bbox_format", "xyxy") != "xyxy":
            raise _Refused(f"only xyxy boxes are read, got bbox_format={d['bbox_format']!r}")
        boxes.append(_pair_list(d["bbox"], 4, "bbox"))
    return boxes


def _grounded(
    qtype: QuestionType,
    answer: Mapping[str, Any],
    width: int,
    height: int,
    coordinate_format: CoordinateFormat,
    ambiguous_as: str,
    out_of_range: str,
) -> tuple[dict[str, Any], str]:
    raw = _points(qtype, answer)
    xs = [v for p in raw for v in p[0::2]]
    ys = [v for p in raw for v in p[1::2]]
    scale = (
        detect_coordinate_format(xs, ys, width, height, ambiguous_as)
        if coordinate_format == "auto"
        else coordinate_format
    )
    frame = _Frame(width, height, scale, out_of_range)
    if qtype == "keypoint":
        x, y = raw[0]
        point = [frame.place(x, "x"), frame.place(y, "y")]
        return {"label": _text(answer, "label"), "point_format": "xy", "point": point}, scale
    detections = []
    for d, (x0, y0, x1, y1) in zip(answer["detections"], raw, strict=True):
        # Corners given in the wrong order are a repairable slip, not a wrong answer.
        x0, x1 = sorted((x0, x1))
        y0, y1 = sorted((y0, y1))
        box = [frame.place(x0, "x"), frame.place(y0, "y"), frame.place(x1, "x"), frame.place(y1, "y")]
        if box[0] == box[2] or box[1] == box[3]:
            if out_of_range == "reject":
                raise _Refused(f"box {d['bbox']!r} of {d.get('label')!r} has no area inside the frame")
            continue  # clipped away: nothing of it lies in the frame
        detections.append({"label": _text(d, "label"), "bbox_format": "xyxy", "bbox": box})
    if not detections:
        raise _Refused("no box of the answer has any area inside the frame")
    return {"detections": detections}, scale


def check_answer(
    qtype: QuestionType,
    answer: Any,
    *,
    width: int,
    height: int,
    coordinate_format: CoordinateFormat = "pixels",
    ambiguous_as: str = "relative_1000",
    out_of_range: str = "reject",
) -> CheckedAnswer:
    """`answer` checked against the shape of `qtype` and returned in stored form (pixel coordinates)."""
    try:
        got = answer_type(answer)
        if got != qtype:
            required, _ = _shape(qtype)
            keys = sorted(answer) if isinstance(answer, Mapping) else type(answer).__name__
            hint = f" (that is {with_article(got)} answer)" if got else ""
            raise _Refused(f"{with_article(qtype)} answer needs keys {sorted(required)}, got {keys}{hint}")
        assert isinstance(answer, Mapping)
        if qtype in ("bbox", "keypoint"):
            stored, scale = _grounded(
                qtype, answer, width, height, coordinate_format, ambiguous_as, out_of_range
            )
            return CheckedAnswer(stored, coordinates=scale)
        if qtype == "count":
            count = answer["count"]
            if isinstance(count, float) and count.is_integer():
                count = int(count)
            if isinstance(count, bool) or not isinstance(count, int) or count < 0:
                raise _Refused(f"'count' must be a whole number >= 0, got {count!r}")
            return CheckedAnswer({"label": _text(answer, "label"), "count": count})
        if qtype == "attribute":
            return CheckedAnswer({k: _text(answer, k) for k in ("label", "attribute", "value")})
        relation = _text(answer, "relation").lower().replace(" ", "_").replace("-", "_")
        if relation not in RELATIONS:
            raise _Refused(f"relation {relation!r} is not one of {', '.join(RELATIONS)}")
        return CheckedAnswer(
            {"subject": _text(answer, "subject"), "relation": relation, "object": _text(answer, "object")}
        )
    except _Refused as refused:
        return CheckedAnswer(None, problem=str(refused))
