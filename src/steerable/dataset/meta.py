"""Tasks and per-episode metadata (`meta/tasks.parquet`, `meta/episodes/**/*.parquet`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from steerable.dataset.layout import EPISODES_DIR, TASKS_PATH
from steerable.dataset.parquet import read_parquet
from steerable.errors import CorruptDatasetError, DatasetNotFoundError

__all__ = ["EPISODE_LOCATION_COLUMNS", "EpisodeMeta", "VideoSpan", "load_episodes", "load_tasks"]


@dataclass(frozen=True)
class VideoSpan:
    """Where an episode's frames sit in a (possibly shared) mp4: the [from, to) time range."""

    chunk_index: int
    file_index: int
    from_timestamp: float
    to_timestamp: float


@dataclass(frozen=True)
class EpisodeMeta:
    episode_index: int
    length: int
    tasks: list[str]
    data_chunk: int
    data_file: int
    from_index: int
    to_index: int
    videos: dict[str, VideoSpan] = field(default_factory=dict)


def load_tasks(root: Path) -> dict[int, str]:
    """task_index -> task string. The string is a `task` column or the pandas index column."""
    path = root / TASKS_PATH
    if not path.is_file():
        raise DatasetNotFoundError(f"{path} does not exist: the dataset has no task table")
    table = read_parquet(path)
    if "task_index" not in table.column_names:
        raise CorruptDatasetError(f"{path} has no 'task_index' column")
    text_cols = [
        f.name
        for f in table.schema
        if f.name != "task_index" and (pa.types.is_string(f.type) or pa.types.is_large_string(f.type))
    ]
    name = "task" if "task" in text_cols else (text_cols[0] if text_cols else None)
    if name is None:
        raise CorruptDatasetError(f"{path} holds no task strings (no 'task' or pandas index column)")
    indices = table.column("task_index").to_pylist()
    texts = table.column(name).to_pylist()
    return {int(i): str(t) for i, t in zip(indices, texts, strict=True)}


# The columns that locate an episode (its data file and index range), in LeRobot's order.
EPISODE_LOCATION_COLUMNS = (
    "episode_index",
    "tasks",
    "length",
    "data/chunk_index",
    "data/file_index",
    "dataset_from_index",
    "dataset_to_index",
)


def load_episodes(root: Path, video_keys: list[str]) -> list[EpisodeMeta]:
    """Every episode's metadata, sorted by episode index. Stats columns are not read."""
    files = sorted((root / EPISODES_DIR).glob("chunk-*/file-*.parquet"))
    if not files:
        raise DatasetNotFoundError(f"no episode metadata under {root / EPISODES_DIR}")
    video_cols = [
        f"videos/{key}/{part}"
        for key in video_keys
        for part in ("chunk_index", "file_index", "from_timestamp", "to_timestamp")
    ]
    episodes: list[EpisodeMeta] = []
    for path in files:
        table = read_parquet(path, columns=list(EPISODE_LOCATION_COLUMNS) + video_cols, optional=video_cols)
        cols = table.to_pydict()
        for i in range(table.num_rows):
            videos = {
                key: VideoSpan(
                    int(cols[f"videos/{key}/chunk_index"][i]),
                    int(cols[f"videos/{key}/file_index"][i]),
                    float(cols[f"videos/{key}/from_timestamp"][i]),
                    float(cols[f"videos/{key}/to_timestamp"][i]),
                )
                for key in video_keys
                if f"videos/{key}/chunk_index" in cols and cols[f"videos/{key}/chunk_index"][i] is not None
            }
            episodes.append(
                EpisodeMeta(
                    episode_index=int(cols["episode_index"][i]),
                    length=int(cols["length"][i]),
                    tasks=list(cols["tasks"][i] or []),
                    data_chunk=int(cols["data/chunk_index"][i]),
                    data_file=int(cols["data/file_index"][i]),
                    from_index=int(cols["dataset_from_index"][i]),
                    to_index=int(cols["dataset_to_index"][i]),
                    videos=videos,
                )
            )
    episodes.sort(key=lambda e: e.episode_index)
    seen = [e.episode_index for e in episodes]
    if len(set(seen)) != len(seen):
        raise CorruptDatasetError(f"{root / EPISODES_DIR} lists an episode index more than once")
    return episodes
