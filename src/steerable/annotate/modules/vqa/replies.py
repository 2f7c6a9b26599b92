"""The reply to each VQA question type as a pydantic model: the JSON schema sent with the question is
generated from it (`vqa_reply(qtype)`), and the answer shapes the checks know are read from it."""

from __future__ import annotations

import functools
from typing import Annotated, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, create_model

from steerable.annotate.modules.vqa.config import QuestionType

__all__ = [
    "ANSWERS",
    "RELATIONS",
    "AttributeAnswer",
    "BboxAnswer",
    "CountAnswer",
    "Detection",
    "KeypointAnswer",
    "Relation",
    "SpatialAnswer",
    "VqaReply",
    "required_keys",
    "vqa_reply",
]

Text = Annotated[str, Field(min_length=1)]
Relation = Literal["left_of", "right_of", "above", "below", "on", "in", "near", "behind", "in_front_of"]
RELATIONS: tuple[str, ...] = get_args(Relation)


class _Shape(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Detection(_Shape):
    label: Text
    bbox: Annotated[list[float], Field(min_length=4, max_length=4)]


class BboxAnswer(_Shape):
    detections: Annotated[list[Detection], Field(min_length=1, max_length=16)]


class KeypointAnswer(_Shape):
    label: Text
    point: Annotated[list[float], Field(min_length=2, max_length=2)]


class CountAnswer(_Shape):
    label: Text
    count: Annotated[int, Field(ge=0)]


class AttributeAnswer(_Shape):
    label: Text
    attribute: Text
    value: Text


class SpatialAnswer(_Shape):
    subject: Text
    relation: Relation
    object: Text


ANSWERS: dict[QuestionType, type[_Shape]] = {
    "bbox": BboxAnswer,
    "keypoint": KeypointAnswer,
    "count": CountAnswer,
    "attribute": AttributeAnswer,
    "spatial": SpatialAnswer,
}


class VqaReply(_Shape):
    """The whole reply: the question the model asks about the frame, and its answer."""

    question: Text
    answer: _Shape


@functools.cache
def vqa_reply(qtype: QuestionType) -> type[VqaReply]:
    """The reply model of a `qtype` question (its answer has that type's shape)."""
    return create_model(f"{qtype.capitalize()}Reply", __base__=VqaReply, answer=(ANSWERS[qtype], ...))


def required_keys(qtype: QuestionType) -> frozenset[str]:
    """The keys every `qtype` answer has."""
    return frozenset(name for name, field in ANSWERS[qtype].model_fields.items() if field.is_required())
