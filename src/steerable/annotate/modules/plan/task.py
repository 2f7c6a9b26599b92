"""The effective task (the dataset's, or one derived from the video) and its task_aug rephrasings."""

from __future__ import annotations

import logging
from typing import Any

from steerable.annotate.modules.plan.config import PlanConfig
from steerable.annotate.modules.plan.prompting import (
    PROMPTS,
    RephrasingsReply,
    SampledVideo,
    TaskReply,
    text_message,
    vision_message,
)
from steerable.annotate.modules.plan.spans import clean_label, label_key
from steerable.errors import VLMReplyError
from steerable.vlm.protocol import VLMClient
from steerable.vlm.structured import ask

__all__ = ["derive_task", "needs_derivation", "rephrase_task", "task_is_unusable", "unique_phrasings"]

log = logging.getLogger(__name__)

# Task strings that recording tools leave behind when nobody typed a task.
_PLACEHOLDERS = frozenset(
    {"debug", "test", "testing", "tbd", "todo", "n/a", "na", "none", "null", "untitled", "unnamed",
     "default", "placeholder", "task", "demo", "example"}
)


def task_is_unusable(task: str, min_words: int) -> bool:
    """True for an empty, too short or placeholder task string."""
    text = task.strip()
    return not text or len(text.split()) < min_words or text.lower().strip(" .") in _PLACEHOLDERS


def needs_derivation(task: str, config: PlanConfig) -> bool:
    """Whether the task is taken from the video under `derive_task_from_video`."""
    mode = config.derive_task_from_video
    return mode == "always" or (mode == "if_short" and task_is_unusable(task, config.derive_task_min_words))


async def derive_task(vlm: VLMClient, video: SampledVideo, affinity: str) -> str | None:
    """One instruction describing the whole episode, from overview sheets; None if the model gives none."""
    sheets = await video.sheets(video.overview())
    text = PROMPTS.load("plan_task_from_video").render(sheet_guide=video.guide(sheets))
    try:
        reply = await ask(vlm, vision_message(sheets, text), TaskReply, affinity=affinity, purpose="plan.task")
    except VLMReplyError as exc:
        log.info("%s: no task from the video: %s", affinity, exc)
        return None
    task = clean_label(reply.task)
    return task or None


def unique_phrasings(task: str, candidates: Any, limit: int) -> list[str]:
    """Cleaned phrasings that differ from the task and from each other (case and punctuation aside)."""
    seen = {label_key(task)}
    out: list[str] = []
    for item in candidates if isinstance(candidates, list) else []:
        text = clean_label(item)
        key = label_key(text)
        if text and key not in seen:
            seen.add(key)
            out.append(text)
    return out[:limit]


async def rephrase_task(vlm: VLMClient, task: str, count: int, affinity: str) -> list[str] | None:
    """Up to `count` distinct rephrasings of `task` (one text-only call); None if the model gives none."""
    text = PROMPTS.load("plan_task_rephrasings").render(task=task, count=count)
    try:
        reply = await ask(vlm, text_message(text), RephrasingsReply, affinity=affinity, purpose="plan.task_aug")
    except VLMReplyError as exc:
        log.info("%s: no task rephrasings: %s", affinity, exc)
        return None
    return unique_phrasings(task, reply.rephrasings, count)
