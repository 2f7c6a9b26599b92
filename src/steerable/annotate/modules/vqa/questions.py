"""What to ask: (frame, camera, question type) draws, the prompt for each type, and its JSON schema."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from steerable.annotate.modules.vqa.config import QUESTION_TYPES, QuestionType, VqaConfig
from steerable.annotate.modules.vqa.replies import RELATIONS, vqa_reply
from steerable.annotate.prompts import Prompt, PromptFolder
from steerable.vlm.structured import reply_schema

__all__ = ["PROMPTS", "Question", "QuestionPrompts", "answer_schema", "plan_questions"]

PROMPTS = PromptFolder("steerable.annotate.modules.vqa")

# The reply shapes as the prompt spells them out.
_SHAPE_TEXT: dict[QuestionType, str] = {
    "bbox": '{"detections": [{"label": "<object>", "bbox": [x_min, y_min, x_max, y_max]}, ...]}',
    "keypoint": '{"label": "<object or part>", "point": [x, y]}',
    "count": '{"label": "<what is counted>", "count": <whole number>}',
    "attribute": (
        '{"label": "<object>", "attribute": "<color|shape|material|size|state|...>", "value": "<value>"}'
    ),
    "spatial": '{"subject": "<object>", "relation": "<' + "|".join(RELATIONS) + '>", "object": "<object>"}',
}
_GROUNDED: frozenset[QuestionType] = frozenset({"bbox", "keypoint"})


def answer_schema(qtype: QuestionType) -> dict[str, Any]:
    """JSON schema of the whole reply to a `qtype` question: {"question": ..., "answer": {...}}."""
    return reply_schema(vqa_reply(qtype))


@dataclass(frozen=True)
class Question:
    time: float  # stored frame timestamp
    camera: str
    qtype: QuestionType


def plan_questions(
    times: Sequence[float], cameras: Sequence[str], config: VqaConfig, rng: np.random.Generator
) -> list[Question]:
    """One question per (tick, camera), each with its own drawn type; capped by a seeded subset."""
    types = config.question_types
    draws = rng.integers(0, len(types), size=len(times) * len(cameras))
    questions = [
        Question(t, camera, types[int(draws[i * len(cameras) + j])])
        for i, t in enumerate(times)
        for j, camera in enumerate(cameras)
    ]
    cap = config.max_questions_per_episode
    if cap is not None and len(questions) > cap:
        keep = sorted(int(i) for i in rng.choice(len(questions), size=cap, replace=False))
        questions = [questions[i] for i in keep]
    return questions


class QuestionPrompts:
    """Renders the question prompt of each type, with the coordinate wording the config asks for."""

    def __init__(self, config: VqaConfig) -> None:
        self.config = config
        self.main = PROMPTS.load("vqa_question")
        self.retry = PROMPTS.load("vqa_retry")
        self.guides: dict[QuestionType, Prompt] = {t: PROMPTS.load(f"vqa_{t}") for t in QUESTION_TYPES}
        # auto asks for the 0-1000 scale most grounding models use natively, then checks each answer.
        asked = "relative_1000" if config.coordinate_format == "auto" else config.coordinate_format
        self.coordinates = PROMPTS.load(f"vqa_coordinates_{asked}")

    def used(self) -> list[Prompt]:
        """Every template this configuration renders (for the staging fingerprint)."""
        grounded = any(t in _GROUNDED for t in self.config.question_types)
        return [
            self.main,
            self.retry,
            *(self.guides[t] for t in self.config.question_types),
            *([self.coordinates] if grounded else []),
        ]

    def render(self, qtype: QuestionType, *, task: str, camera: str, width: int, height: int) -> str:
        guide = self.guides[qtype]
        values: dict[str, object] = {}
        if "coordinates" in guide.placeholders:
            sizes = {"width": width, "height": height}
            values["coordinates"] = self.coordinates.render(
                **{k: v for k, v in sizes.items() if k in self.coordinates.placeholders}
            ).strip()
        return self.main.render(
            task=task,
            camera=camera,
            question_type=qtype,
            type_guide=guide.render(**values).strip(),
            answer_shape='{"question": "<question>", "answer": ' + _SHAPE_TEXT[qtype] + "}",
        )

    def render_retry(self, problem: str) -> str:
        return self.retry.render(problem=problem)
