"""The vqa module: frame-grounded question/answer pairs per camera, coordinates in frame pixels."""

from steerable.annotate.modules.vqa.answers import (
    RELATIONS,
    CheckedAnswer,
    answer_type,
    camera_frame_sizes,
    check_answer,
    detect_coordinate_format,
)
from steerable.annotate.modules.vqa.config import (
    COORDINATE_FORMATS,
    QUESTION_TYPES,
    CoordinateFormat,
    QuestionType,
    VqaConfig,
)
from steerable.annotate.modules.vqa.module import VqaModule, resolve_cameras, validate_vqa_rows

__all__ = [
    "COORDINATE_FORMATS",
    "QUESTION_TYPES",
    "RELATIONS",
    "CheckedAnswer",
    "CoordinateFormat",
    "QuestionType",
    "VqaConfig",
    "VqaModule",
    "answer_type",
    "camera_frame_sizes",
    "check_answer",
    "detect_coordinate_format",
    "resolve_cameras",
    "validate_vqa_rows",
]
