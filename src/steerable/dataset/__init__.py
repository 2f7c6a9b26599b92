"""LeRobot v3 dataset I/O: layout, metadata, frame tables, video, writing, synthetic data.

Names load on first use (`steerable.lazy`), so importing the package, or one light submodule of it,
costs neither pyarrow nor pydantic until a dataset is opened.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from steerable.lazy import lazy_exports

if TYPE_CHECKING:
    from steerable.dataset.info import DatasetInfo, load_info, write_info
    from steerable.dataset.lerobot import LeRobotDataset
    from steerable.dataset.meta import EpisodeMeta, VideoSpan

__all__ = [
    "DatasetInfo",
    "EpisodeMeta",
    "LeRobotDataset",
    "VideoSpan",
    "load_info",
    "open_dataset",
    "write_info",
]

__getattr__ = lazy_exports(
    __name__,
    {
        **dict.fromkeys(("DatasetInfo", "load_info", "write_info"), "info"),
        "LeRobotDataset": "lerobot",
        **dict.fromkeys(("EpisodeMeta", "VideoSpan"), "meta"),
    },
)


def open_dataset(
    source: Path | str, *, revision: str | None = None, work_dir: Path | None = None
) -> LeRobotDataset:
    """Open a local dataset root, or download a Hub repo id into a working copy and open that."""
    from steerable.dataset.hub import download_dataset, looks_like_repo_id
    from steerable.dataset.lerobot import LeRobotDataset

    if isinstance(source, str) and looks_like_repo_id(source):
        return LeRobotDataset(download_dataset(source, revision=revision, work_dir=work_dir))
    return LeRobotDataset(source)
