"""The contact sheets the plan module would show the model for one episode, without calling it."""

from __future__ import annotations

from dataclasses import dataclass

from steerable.annotate.context import EpisodeContext
from steerable.annotate.modules.plan.config import PlanConfig
from steerable.annotate.modules.plan.sheets import ContactSheet, build_contact_sheets
from steerable.annotate.modules.plan.spans import plan_windows
from steerable.dataset import LeRobotDataset
from steerable.errors import DatasetError

__all__ = ["WindowSheets", "episode_sheets"]


@dataclass(frozen=True)
class WindowSheets:
    """The sheets of one segmentation window (an episode short enough has a single window)."""

    window: int
    sheets: list[ContactSheet]


def episode_sheets(
    dataset: LeRobotDataset, episode_index: int, *, camera: str | None = None, config: PlanConfig | None = None
) -> list[WindowSheets]:
    """Sample, decode and tile one episode exactly as the plan module's describe/segment calls do."""
    config = config or PlanConfig()
    camera = camera or next(iter(dataset.camera_keys), None)
    if camera is None:
        raise DatasetError(f"{dataset.root} has no video camera, so there are no frames to tile")
    episode = dataset.episode(episode_index)
    timestamps = dataset.episode_timestamps(episode_index)
    ctx = EpisodeContext(dataset, episode, timestamps, task=dataset.task_of(episode), seed=0)
    times = ctx.sample_times(config.frames_per_second, start=float(timestamps[0])) if len(timestamps) else []
    frames = dict(zip(times, dataset.decode_frames(episode_index, camera, times), strict=True))
    out = []
    for index, window in enumerate(plan_windows(times, config.max_frames_per_prompt, config.overlap_frames())):
        sheets = build_contact_sheets(
            [frames[t] for t in window],
            window,
            columns=config.contact_sheet_columns,
            per_sheet=config.contact_sheet_frames_per_sheet,
            frame_width=config.contact_sheet_frame_width,
            quality=config.contact_sheet_quality,
        )
        out.append(WindowSheets(index, sheets))
    return out
