"""The `motion` module: proprioception-only motion rows, keystates and (without a VLM) subtasks.

The per-episode step: reads the state matrix and runs the motion library (`steerable.motion`) on it.
With the plan module running, an episode whose video is missing still gets heuristic subtasks.
"""

from __future__ import annotations

import asyncio
from dataclasses import asdict
from typing import Any, ClassVar

import numpy as np

from steerable.annotate.context import EpisodeContext
from steerable.annotate.module import ModuleOutput
from steerable.annotate.modules.motion.config import MotionConfig
from steerable.dataset.frames import feature_matrix
from steerable.errors import DatasetError
from steerable.motion.dims import find_dims
from steerable.motion.keystates import detect_keystates
from steerable.motion.primitives import motion_rows
from steerable.motion.subtasks import heuristic_language

__all__ = ["MotionModule"]


class MotionModule:
    """Runs without any model, so it also covers episodes whose video is missing."""

    name: ClassVar[str] = "motion"
    requires: ClassVar[tuple[str, ...]] = ()

    def __init__(self, config: MotionConfig, *, derive_subtasks: bool) -> None:
        self.config = config
        self.params = config.params()
        self.derive_subtasks = derive_subtasks

    def fingerprint(self) -> dict[str, Any]:
        settings = self.config.model_dump(mode="json", exclude={"enabled"})
        # With the plan module running, subtasks are derived only for episodes without its video.
        derive: bool | str = self.derive_subtasks or "without video"
        return {"config": settings, "derive_subtasks": derive, "algorithm": 3}

    async def run(self, ctx: EpisodeContext) -> ModuleOutput:
        return await asyncio.to_thread(self._run, ctx)

    def _run(self, ctx: EpisodeContext) -> ModuleOutput:
        dims = find_dims(ctx.dataset.features, self.params, ctx.dataset.stats)
        notes = list(dims.notes)
        if dims.state_key is None:
            return ModuleOutput(meta={"keystates": [], "heuristic_subtasks": False}, notes=notes)
        table = ctx.dataset.read_episode(ctx.episode_index, [dims.state_key])
        state = feature_matrix(table, dims.state_key).astype(np.float64)
        timestamps = ctx.timestamps
        keystates = detect_keystates(timestamps, state, dims, self.params)
        rows = motion_rows(timestamps, state, dims, self.params, keystates=keystates)
        derive = self.derive_subtasks or not _has_video(ctx)
        if derive and not self.derive_subtasks:  # the plan module cannot watch it: these stand in
            notes.append(f"no video of {ctx.camera}: heuristic subtask rows, as without a model")
        meta: dict[str, Any] = {
            "keystates": [_plain(asdict(k)) for k in keystates],
            "heuristic_subtasks": derive,
        }
        if derive:
            found = heuristic_language(
                timestamps,
                keystates,
                ctx.task,
                granularity=self.config.subtask_granularity,
                state=state,
                dims=dims,
                params=self.params,
                name_from_task=self.config.name_from_task,
            )
            rows += found.rows
            meta["named_from_task"] = found.named
            notes += [found.note] if found.note else []
        return ModuleOutput(rows=rows, meta=meta, notes=notes)


def _has_video(ctx: EpisodeContext) -> bool:
    """Whether the episode's video of the run's camera is on disk (what the VLM modules watch)."""
    if ctx.camera is None:
        return False
    try:
        return ctx.dataset.video_path(ctx.camera, ctx.episode).is_file()
    except DatasetError:  # no video in the episode metadata
        return False


def _plain(values: dict[str, Any]) -> dict[str, Any]:
    """numpy scalars -> Python numbers, so staging JSON stays exact and portable."""
    return {k: (v.item() if isinstance(v, np.generic) else v) for k, v in values.items()}
