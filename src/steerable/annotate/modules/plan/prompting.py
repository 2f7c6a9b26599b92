"""What the plan module sends: sampled frames as contact sheets, chat messages, reply schemas."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Sequence
from typing import Annotated, Any

import numpy as np
from PIL import Image
from pydantic import BaseModel, Field, create_model

from steerable.annotate.modules.plan.config import PlanConfig
from steerable.annotate.modules.plan.sheets import ContactSheet, badged_tile, sheets_from_tiles
from steerable.annotate.prompts import PromptFolder

__all__ = [
    "PROMPTS",
    "REPLIES",
    "DescribeReply",
    "MemoryReply",
    "RephrasingsReply",
    "SegmentItem",
    "SegmentReply",
    "TaskReply",
    "SampledVideo",
    "memory_reply",
    "text_message",
    "vision_message",
]

PROMPTS = PromptFolder("steerable.annotate.modules.plan")

class TaskReply(BaseModel):
    task: str


class RephrasingsReply(BaseModel):
    rephrasings: list[str]


class DescribeReply(BaseModel):
    description: str


class SegmentItem(BaseModel):
    text: str
    start: float


class SegmentReply(BaseModel):
    subtasks: list[SegmentItem]


class MemoryReply(BaseModel):
    memories: list[str]


@functools.cache
def memory_reply(count: int) -> type[MemoryReply]:
    """Exactly one memory per completed subtask, so a reply can never shift memories between boundaries."""
    return create_model(
        f"MemoryReply{count}",
        __base__=MemoryReply,
        memories=(Annotated[list[str], Field(min_length=count, max_length=count)], ...),
    )


REPLIES: tuple[type[BaseModel], ...] = (TaskReply, RephrasingsReply, DescribeReply, SegmentReply, MemoryReply)


def text_message(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


def vision_message(sheets: Sequence[ContactSheet], text: str) -> list[dict[str, Any]]:
    """Sheets first, then the instructions that refer to them."""
    blocks: list[dict[str, Any]] = [{"type": "image", "image": sheet.image} for sheet in sheets]
    blocks.append({"type": "text", "text": text})
    return [{"role": "user", "content": blocks}]


class SampledVideo:
    """An episode's frames sampled for prompting (decoded once), served as badged contact sheets."""

    def __init__(self, times: Sequence[float], frames: Sequence[np.ndarray], config: PlanConfig) -> None:
        if len(times) != len(frames):
            raise ValueError(f"{len(frames)} frames decoded for {len(times)} sampled times")
        self.times = [float(t) for t in times]
        self._frames: dict[float, np.ndarray] = dict(zip(self.times, frames, strict=True))
        self._tiles: dict[float, Image.Image] = {}  # badged tiles, made once per time
        # Sheets by the times they show: describe, segment and the overview often show the same
        # ones, and the same sheet objects let the VLM client reuse their encoding.
        self._sheets: dict[tuple[float, ...], list[ContactSheet]] = {}
        self._config = config

    async def prepare(self) -> None:
        """Make every tile now and let go of the full frames (a tile is ~1/8 of a VGA frame)."""
        await self._make_tiles(self.times)
        self._frames.clear()

    async def _make_tiles(self, times: Sequence[float]) -> None:
        width = self._config.contact_sheet_frame_width
        missing = [t for t in dict.fromkeys(times) if t not in self._tiles]
        if missing:
            made = await asyncio.to_thread(lambda: [badged_tile(self._frames[t], t, width) for t in missing])
            self._tiles.update(zip(missing, made, strict=True))

    def overview(self) -> list[float]:
        """At most `max_frames_per_prompt` times spread evenly over the whole episode."""
        limit = self._config.max_frames_per_prompt
        if len(self.times) <= limit:
            return list(self.times)
        picks = np.unique(np.linspace(0, len(self.times) - 1, limit).round().astype(int))
        return [self.times[i] for i in picks]

    async def sheets(self, times: Sequence[float]) -> list[ContactSheet]:
        """Contact sheets of the given sampled times (tiled off the event loop)."""
        c = self._config
        times = [float(t) for t in times]
        key = tuple(times)
        if key not in self._sheets:
            await self._make_tiles(times)
            self._sheets[key] = sheets_from_tiles(
                [self._tiles[t] for t in times],
                times,
                columns=c.contact_sheet_columns,
                per_sheet=c.contact_sheet_frames_per_sheet,
                quality=c.contact_sheet_quality,
            )
        return list(self._sheets[key])

    def guide(self, sheets: Sequence[ContactSheet]) -> str:
        """The how-to-read-the-sheets preamble for these sheets."""
        times = [t for sheet in sheets for t in sheet.times]
        return PROMPTS.load("plan_sheet_guide").render(
            sheet_count=len(sheets),
            frame_count=len(times),
            start=f"{times[0]:.2f}",
            end=f"{times[-1]:.2f}",
            columns=self._config.contact_sheet_columns,
        )
