"""Describe, then segment: per window, the subtasks the model reads off the contact sheets."""

from __future__ import annotations

import logging
from typing import Any

from steerable.annotate.modules.plan.config import PlanConfig
from steerable.annotate.modules.plan.prompting import (
    PROMPTS,
    DescribeReply,
    SampledVideo,
    SegmentReply,
    vision_message,
)
from steerable.annotate.modules.plan.spans import (
    Span,
    SpanReport,
    merge_windows,
    plan_windows,
    read_segment_reply,
)
from steerable.errors import VLMReplyError
from steerable.vlm.protocol import VLMClient
from steerable.vlm.structured import ask

__all__ = ["segment_video"]

log = logging.getLogger(__name__)


async def segment_video(
    vlm: VLMClient, video: SampledVideo, task: str, config: PlanConfig, affinity: str, report: SpanReport
) -> tuple[list[Span], int]:
    """Subtask spans over the sampled frames (merged across windows) and the number of windows.

    Calls run one after another: the engine already keeps the server busy with other episodes.
    """
    windows = plan_windows(video.times, config.max_frames_per_prompt, config.overlap_frames())
    rules = PROMPTS.load("plan_event_rules").render()
    per_window: list[list[Span]] = []
    for times in windows:
        sheets = await video.sheets(times)
        where = {"sheet_guide": video.guide(sheets), "task": task, "start": f"{times[0]:.2f}",
                 "end": f"{times[-1]:.2f}", "event_rules": rules}
        observation = ""
        if config.subtask_describe_first:
            description = await _describe(vlm, sheets, PROMPTS.load("plan_describe").render(**where), affinity)
            if description:
                observation = "\n\n" + PROMPTS.load("plan_observation").render(description=description)
        text = PROMPTS.load("plan_segment").render(
            **where,
            observation_block=observation,
            min_subtask_seconds=f"{config.min_subtask_seconds:g}",
            max_steps=config.plan_max_steps,
        )
        reply = await ask(vlm, vision_message(sheets, text), SegmentReply, affinity=affinity, purpose="plan.segment")
        per_window.append(read_segment_reply(reply, times, report))
    if len(windows) > 1:
        log.debug("%s: %d windows, %d raw spans", affinity, len(windows), sum(map(len, per_window)))
    return merge_windows(per_window, windows, report), len(windows)


async def _describe(vlm: VLMClient, sheets: list[Any], text: str, affinity: str) -> str:
    """The observation pass; an empty string (segment from the frames alone) if the model gives none."""
    try:
        reply = await ask(vlm, vision_message(sheets, text), DescribeReply, affinity=affinity, purpose="plan.describe")
    except VLMReplyError as exc:
        log.info("%s: segmenting without a description: %s", affinity, exc)
        return ""
    return reply.description.strip()
