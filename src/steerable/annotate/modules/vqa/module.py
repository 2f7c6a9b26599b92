"""The vqa module: grounded question/answer pairs per camera at a fixed rate, answers in one convention.

Per episode: ticks at `vqa_emission_hz` on stored frame times; per tick and camera one question of a
seeded random type, asked about that single frame. The answer must have the shape of the type asked
(a wrong shape or an out-of-frame answer is re-asked, then dropped with a note; the episode goes on),
and coordinates are stored as pixels of the original frame (see `answers`). All of an episode's
questions are in flight together; the client's global limit paces them.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar

import numpy as np
from pydantic import ValidationError

from steerable.annotate.context import EpisodeContext, FrameCache
from steerable.annotate.module import ModuleOutput
from steerable.annotate.modules.vqa.answers import CheckedAnswer, answer_type, check_answer
from steerable.annotate.modules.vqa.config import VqaConfig
from steerable.annotate.modules.vqa.questions import Question, QuestionPrompts, answer_schema, plan_questions
from steerable.annotate.modules.vqa.replies import vqa_reply
from steerable.errors import AnnotationError, ConfigError, VLMReplyError, with_article
from steerable.vlm.protocol import VLMClient

__all__ = ["VqaModule", "resolve_cameras", "validate_vqa_rows"]

_Result = tuple[list[dict[str, Any]], str | None, str | None]  # rows, note, coordinate scale


def resolve_cameras(
    config: VqaConfig, available: Sequence[str], default: str | None
) -> tuple[list[str], list[str]]:
    """The camera feature keys to ask about, and notes; unknown names in `--vqa.cameras` are an error."""
    if config.cameras is not None:
        chosen = []
        for name in config.cameras:
            matches = [k for k in available if k == name] or [k for k in available if k.endswith("." + name)]
            if len(matches) != 1:
                raise ConfigError(
                    f"--vqa.cameras names {name!r}, which is not {'one' if not matches else 'a unique'} "
                    f"camera of this dataset; its cameras are: {', '.join(available) or 'none'}"
                )
            if matches[0] not in chosen:
                chosen.append(matches[0])
        return chosen, []
    if config.restrict_to_default_camera and available:
        if default is not None and default in available:
            return [default], []
        return [available[0]], [
            f"default camera {default!r} is not a video of this dataset; asked about {available[0]}"
        ]
    return list(available), []


def _rows(q: Question, question: str, answer: dict[str, Any]) -> list[dict[str, Any]]:
    base = {"style": "vqa", "timestamp": q.time, "camera": q.camera, "tool_calls": None}
    stored = json.dumps(answer, sort_keys=True, ensure_ascii=False)
    return [{"role": "user", "content": question, **base}, {"role": "assistant", "content": stored, **base}]


class VqaModule:
    """Frame-grounded VQA pairs (bbox, keypoint, count, attribute, spatial); needs a VLM."""

    name: ClassVar[str] = "vqa"
    requires: ClassVar[tuple[str, ...]] = ()

    def __init__(self, config: VqaConfig, *, vlm: VLMClient | None = None) -> None:
        self.config = config
        self.prompts = QuestionPrompts(config)
        self._model_id = vlm.model_id if vlm is not None else None

    def fingerprint(self) -> dict[str, Any]:
        return {
            "config": self.config.model_dump(mode="json", exclude={"enabled"}),
            "prompts": [p.id for p in self.prompts.used()],
            "model": self._model_id,
            "algorithm": 1,
        }

    async def run(self, ctx: EpisodeContext) -> ModuleOutput:
        vlm: VLMClient | None = ctx.vlm
        if vlm is None:
            raise AnnotationError("the vqa module needs a VLM: configure --vlm.* or pass --vqa.enabled=false")
        cameras, notes = resolve_cameras(self.config, list(ctx.dataset.camera_keys), ctx.camera)
        if not cameras:
            return ModuleOutput(notes=["the dataset has no video camera: no VQA rows"])
        ticks = ctx.sample_times(self.config.vqa_emission_hz)
        questions = plan_questions(ticks, cameras, self.config, ctx.rng("vqa"))
        frames = ctx.frames or FrameCache(ctx.dataset, ctx.episode)
        images: dict[tuple[str, float], np.ndarray] = {}
        for camera in cameras:
            times = sorted({q.time for q in questions if q.camera == camera})
            images.update(zip(((camera, t) for t in times), await frames.get(camera, times), strict=True))
        results = await asyncio.gather(
            *(self._ask(ctx, vlm, q, images[(q.camera, q.time)]) for q in questions)
        )
        rows: list[dict[str, Any]] = []
        scales: Counter[str] = Counter()
        for result_rows, note, scale in results:
            rows.extend(result_rows)
            if note:
                notes.append(note)
            if scale:
                scales[scale] += 1
        answered = len(rows) // 2
        if questions and not answered:  # nothing usable: a failed module, never staged as done
            raise AnnotationError(f"none of its {len(questions)} questions got a usable answer ({notes[-1]})")
        meta = {
            "cameras": cameras,
            "asked": len(questions),
            "answered": answered,
            "dropped": len(questions) - answered,
            "coordinate_scales": dict(sorted(scales.items())),
        }
        return ModuleOutput(rows=rows, meta=meta, notes=notes)

    async def _ask(self, ctx: EpisodeContext, vlm: VLMClient, q: Question, frame: np.ndarray) -> _Result:
        height, width = frame.shape[:2]
        prompt = self.prompts.render(
            q.qtype, task=ctx.effective_task, camera=q.camera, width=width, height=height
        )
        messages: list[dict[str, Any]] = [
            {"role": "user", "content": [{"type": "image", "image": frame}, {"type": "text", "text": prompt}]}
        ]
        where = f"{with_article(q.qtype)} question on {q.camera}"  # no time: the run summary groups and counts them
        problem = ""
        for _ in range(1 + self.config.max_retries):
            try:
                reply = await vlm.generate_json(
                    messages,
                    answer_schema(q.qtype),
                    affinity=f"episode-{ctx.episode_index}",
                    purpose=f"vqa.{q.qtype}",
                )
            except VLMReplyError as error:
                return [], f"{where} was dropped: no usable reply ({error.reason})", None
            question, checked = self._read(reply, q, width, height)
            if checked.answer is not None:
                return _rows(q, question, checked.answer), None, checked.coordinates
            problem = checked.problem or "unusable reply"
            messages = [
                *messages,
                {"role": "assistant", "content": json.dumps(reply, ensure_ascii=False, default=str)},
                {"role": "user", "content": self.prompts.render_retry(problem)},
            ]
        return [], f"{where} was dropped: {problem}", None

    def _read(self, reply: Any, q: Question, width: int, height: int) -> tuple[str, CheckedAnswer]:
        """The question and the checked answer. A reply is read into the model its schema came from;
        one that does not fit it (from a backend that skips the schema) is checked as it is, so the
        re-ask can say exactly what is wrong."""
        try:
            parsed = vqa_reply(q.qtype).model_validate(reply)
        except ValidationError:
            parsed = None
        if parsed is not None:
            question: Any = parsed.question
            answer: Any = parsed.answer.model_dump()
        elif isinstance(reply, Mapping):
            question, answer = reply.get("question"), reply.get("answer")
        else:
            return "", CheckedAnswer(
                None, problem=f"the reply must be a JSON object, got {type(reply).__name__}"
            )
        if not isinstance(question, str) or not question.strip():
            return "", CheckedAnswer(None, problem="'question' must be a non-empty string")
        checked = check_answer(
            q.qtype,
            answer,
            width=width,
            height=height,
            coordinate_format=self.config.coordinate_format,
            ambiguous_as=self.config.auto_ambiguous_as,
            out_of_range=self.config.out_of_range,
        )
        return question.strip(), checked


def validate_vqa_rows(
    rows: Iterable[Mapping[str, Any]], cameras: Sequence[str], frame_sizes: Mapping[str, tuple[int, int]]
) -> list[str]:
    """Problems with an episode's VQA rows; `frame_sizes` maps camera key -> (width, height).

    Each (time, camera) holds exactly one user question and one assistant answer; the answer is JSON
    of a known shape whose coordinates lie inside that camera's frame.
    """
    problems: list[str] = []
    roles: dict[tuple[float, str], Counter[str]] = defaultdict(Counter)
    for r in rows:
        if r.get("style") != "vqa":
            continue
        t, camera, role, content = r.get("timestamp"), r.get("camera"), r.get("role"), r.get("content")
        if t is None:
            problems.append(f"vqa row without a timestamp: {dict(r)!r}")
            continue
        at = f"vqa {role} row at t={float(t):.4f}s camera={camera!r}"
        if camera not in cameras:
            problems.append(f"{at}: camera is not one of the dataset's video keys {list(cameras)}")
        if role not in ("user", "assistant"):
            problems.append(f"{at}: role must be user (question) or assistant (answer)")
            continue
        roles[(float(t), str(camera))][role] += 1
        if not isinstance(content, str) or not content.strip():
            problems.append(f"{at}: empty content")
        elif role == "assistant":
            problems.extend(f"{at}: {p}" for p in _answer_problems(content, frame_sizes.get(str(camera))))
    for (t, camera), counts in sorted(roles.items()):
        for role in ("user", "assistant"):
            if counts[role] != 1:
                problems.append(
                    f"vqa at t={t:.4f}s camera={camera!r} has {counts[role]} {role} rows; "
                    "expected exactly one"
                )
    return problems


def _answer_problems(content: str, size: tuple[int, int] | None) -> list[str]:
    try:
        answer = json.loads(content)
    except ValueError as error:
        return [f"answer is not valid JSON ({error})"]
    qtype = answer_type(answer)
    if qtype is None:
        keys = sorted(answer) if isinstance(answer, dict) else type(answer).__name__
        return [f"answer matches no known VQA shape (keys {keys})"]
    width, height = size if size is not None else (10**9, 10**9)
    checked = check_answer(qtype, answer, width=width, height=height)
    return [checked.problem] if checked.problem else []
