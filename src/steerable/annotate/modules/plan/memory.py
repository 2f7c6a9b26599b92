"""The memory chain: after each completed subtask, a short first-person account of progress so far.

All memories of an episode come from ONE text-only call that sees the whole subtask list, instead
of one chained call per boundary: the chain stays consistent and costs one round-trip. If the model
cannot produce them, memories are built from the completed subtask labels instead (and noted).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from steerable.annotate.modules.plan.prompting import PROMPTS, memory_reply, text_message
from steerable.annotate.modules.plan.spans import clean_label
from steerable.errors import VLMReplyError
from steerable.vlm.protocol import VLMClient
from steerable.vlm.structured import ask

__all__ = ["memory_chain", "template_memories"]

log = logging.getLogger(__name__)


def template_memories(labels: Sequence[str]) -> list[str]:
    """Memory i lists the subtasks completed before boundary i+1 (no model involved)."""
    return [f"Completed so far: {'; '.join(labels[: i + 1])}." for i in range(len(labels) - 1)]


async def memory_chain(vlm: VLMClient, task: str, labels: Sequence[str], affinity: str) -> tuple[list[str], bool]:
    """One memory per subtask boundary (len(labels) - 1 of them), and whether the model wrote them."""
    count = len(labels) - 1
    if count < 1:
        return [], True
    numbered = "\n".join(f"{i}. {label}" for i, label in enumerate(labels, 1))
    text = PROMPTS.load("plan_memory").render(task=task, subtasks=numbered, count=count)
    try:
        reply = await ask(vlm, text_message(text), memory_reply(count), affinity=affinity, purpose="plan.memory")
    except VLMReplyError as exc:
        log.info("%s: memories from subtask labels instead: %s", affinity, exc)
        return template_memories(labels), False
    memories = [clean_label(m) for m in reply.memories]
    if len(memories) != count or not all(memories):
        return template_memories(labels), False
    # clean_label drops the final period that labels must not carry; memories are sentences.
    return [m if m.endswith(("!", "?")) else f"{m}." for m in memories], True
