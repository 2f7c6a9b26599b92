"""The vqa module: frame-grounded question/answer pairs per camera, coordinates in frame pixels."""

from typing import TYPE_CHECKING

from steerable.annotate.modules.vqa.config import (
    COORDINATE_FORMATS,
    QUESTION_TYPES,
    CoordinateFormat,
    QuestionType,
    VqaConfig,
)
from steerable.annotate.modules.vqa.stage import VqaStage
from steerable.lazy import lazy_exports

if TYPE_CHECKING:
    from steerable.annotate.modules.vqa.answers import (
        CheckedAnswer,
        answer_type,
        camera_frame_sizes,
        check_answer,
        detect_coordinate_format,
    )
    from steerable.annotate.modules.vqa.module import VqaModule, resolve_cameras, validate_vqa_rows
    from steerable.annotate.modules.vqa.replies import RELATIONS, VqaReply, vqa_reply

__all__ = [
    "COORDINATE_FORMATS",
    "QUESTION_TYPES",
    "RELATIONS",
    "CheckedAnswer",
    "CoordinateFormat",
    "QuestionType",
    "VqaConfig",
    "VqaModule",
    "VqaReply",
    "VqaStage",
    "answer_type",
    "camera_frame_sizes",
    "check_answer",
    "detect_coordinate_format",
    "resolve_cameras",
    "validate_vqa_rows",
    "vqa_reply",
]

_ANSWERS = ("CheckedAnswer", "answer_type", "camera_frame_sizes", "check_answer", "detect_coordinate_format")
__getattr__ = lazy_exports(
    __name__,
    {
        **dict.fromkeys(_ANSWERS, "answers"),
        **dict.fromkeys(("VqaModule", "resolve_cameras", "validate_vqa_rows"), "module"),
        **dict.fromkeys(("RELATIONS", "VqaReply", "vqa_reply"), "replies"),
    },
)
