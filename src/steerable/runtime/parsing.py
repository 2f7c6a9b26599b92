"""The VLM planner's replies: one pydantic model per prompt purpose, and how a reply becomes an update.

The model a reply is read into is also the JSON schema the server is constrained by
(`steerable.vlm.structured.ask`), so the two cannot drift apart. Text fields may hold
`<say>...</say>` markers (the way tokenizers flatten a `say` call, so a VLM fine-tuned on
`steerable export` output may write them): every marker becomes speech and leaves the text.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, model_validator

from steerable.control import HighLevelUpdate

if TYPE_CHECKING:
    from steerable.runtime.prompts import Purpose

__all__ = ["REPLIES", "AnswerReply", "MemoryReply", "Reply", "SpeechReply", "SubtaskReply", "split_say"]

_SAY = re.compile(r"<\s*say\s*>(.*?)<\s*/\s*say\s*>", re.IGNORECASE | re.DOTALL)


def split_say(text: str) -> tuple[str, list[str]]:
    """(text without the `<say>` markers, the spoken texts in order, quotes trimmed)."""
    spoken = [m.strip().strip("\"'").strip() for m in _SAY.findall(text)]
    rest = _SAY.sub(" ", text)
    rest = re.sub(r"[ \t]+\n", "\n", re.sub(r"[ \t]{2,}", " ", rest)).strip()
    return rest, [s for s in spoken if s]


class Reply(BaseModel):
    """A reply of the VLM planner; `update()` is what it tells the runtime."""

    model_config = ConfigDict(extra="forbid")

    def update(self) -> HighLevelUpdate:
        """The reply as an update: fields it leaves out keep their value, `<say>` markers become speech."""
        texts: dict[str, str] = {}
        speech: list[str] = []
        for key, value in self.model_dump(exclude_none=True).items():
            if not isinstance(value, str):
                continue
            text, said = split_say(value)
            speech += said
            if key == "speech":
                speech += [text] if text else []
            else:
                texts[key] = text
        return HighLevelUpdate(
            subtask=texts.get("subtask"), plan=texts.get("plan"), memory=texts.get("memory"),
            answer=texts.get("answer"), speech=" ".join(speech) or None,
        )


class SubtaskReply(Reply):
    """A periodic update: the subtask now (and the plan), or that the task is done."""

    subtask: str
    plan: str | None = None
    task_done: bool = False

    @model_validator(mode="after")
    def _says_what_to_do(self) -> SubtaskReply:
        if not split_say(self.subtask)[0] and not self.task_done:
            raise ValueError("the model returned an empty subtask")
        return self

    def update(self) -> HighLevelUpdate:
        return replace(super().update(), task_done=self.task_done)


class MemoryReply(Reply):
    """The memory note written when the subtask changed."""

    memory: str


class SpeechReply(Reply):
    """The reply to an interjection: what to say, and the subtask (and plan) it leads to."""

    speech: str
    subtask: str | None = None
    plan: str | None = None


class AnswerReply(Reply):
    """The answer to an operator's question."""

    answer: str


REPLIES: dict[Purpose, type[Reply]] = {
    "subtask": SubtaskReply,
    "memory": MemoryReply,
    "speech": SpeechReply,
    "vqa": AnswerReply,
}
