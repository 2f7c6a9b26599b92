"""The `motion` module: proprioception-only motion rows, keystates and (without a VLM) subtasks."""

from __future__ import annotations

import asyncio
from dataclasses import asdict
from typing import Any, ClassVar

import numpy as np

from steerable.annotate.context import EpisodeContext
from steerable.annotate.module import ModuleOutput
from steerable.annotate.modules.motion.config import MotionConfig
from steerable.annotate.modules.motion.dims import find_dims
from steerable.annotate.modules.motion.keystates import detect_keystates
from steerable.annotate.modules.motion.primitives import motion_rows
from steerable.annotate.modules.motion.subtasks import heuristic_subtasks
from steerable.dataset.frames import feature_matrix

__all__ = ["MotionModule"]


class MotionModule:
    """Runs without any model, so it also covers episodes whose video is missing."""

    name: ClassVar[str] = "motion"
    requires: ClassVar[tuple[str, ...]] = ()

    def __init__(self, config: MotionConfig, *, derive_subtasks: bool) -> None:
        self.config = config
        self.derive_subtasks = derive_subtasks

    def fingerprint(self) -> dict[str, Any]:
        settings = self.config.model_dump(mode="json", exclude={"enabled"})
        if not self.derive_subtasks:
            settings.pop("subtask_granularity", None)
        return {"config": settings, "derive_subtasks": self.derive_subtasks, "algorithm": 2}

    async def run(self, ctx: EpisodeContext) -> ModuleOutput:
        return await asyncio.to_thread(self._run, ctx)

    def _run(self, ctx: EpisodeContext) -> ModuleOutput:
        dims = find_dims(ctx.dataset.features, self.config, ctx.dataset.stats)
        notes = list(dims.notes)
        if dims.state_key is None:
            return ModuleOutput(meta={"keystates": [], "heuristic_subtasks": False}, notes=notes)
        table = ctx.dataset.read_episode(ctx.episode_index, [dims.state_key])
        state = feature_matrix(table, dims.state_key).astype(np.float64)
        timestamps = ctx.timestamps
        keystates = detect_keystates(timestamps, state, dims, self.config)
        rows = motion_rows(timestamps, state, dims, self.config, keystates=keystates)
        meta: dict[str, Any] = {
            "keystates": [_plain(asdict(k)) for k in keystates],
            "heuristic_subtasks": self.derive_subtasks,
        }
        if self.derive_subtasks:
            rows += heuristic_subtasks(
                timestamps,
                keystates,
                ctx.task,
                granularity=self.config.subtask_granularity,
                state=state,
                dims=dims,
                config=self.config,
            )
        return ModuleOutput(rows=rows, meta=meta, notes=notes)


def _plain(values: dict[str, Any]) -> dict[str, Any]:
    """numpy scalars -> Python numbers, so staging JSON stays exact and portable."""
    return {k: (v.item() if isinstance(v, np.generic) else v) for k, v in values.items()}
