"""A LeRobot v3 dataset on local disk: metadata, per-episode frame tables, camera frames."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from steerable.dataset.commit import recover_folder
from steerable.dataset.info import DatasetInfo, load_info
from steerable.dataset.layout import CODEBASE_VERSION, INFO_PATH, STATS_PATH
from steerable.dataset.meta import EpisodeMeta, load_episodes, load_tasks
from steerable.dataset.parquet import file_metadata, read_first_row, read_row_groups
from steerable.errors import (
    CorruptDatasetError,
    DatasetError,
    DatasetNotFoundError,
    UnsupportedDatasetVersionError,
    VideoNotFoundError,
)

__all__ = ["LeRobotDataset", "check_layout"]

_CONVERT_HINT = (
    "convert it to v3.0 first with LeRobot's converter "
    "(`python -m lerobot.datasets.v30.convert_dataset_v21_to_v30 --repo-id=<repo>`)"
)


def check_layout(root: Path) -> None:
    """Fail with a precise reason when `root` is not a LeRobot v3 dataset."""
    if not root.exists():
        raise DatasetNotFoundError(f"dataset root {root} does not exist")
    if not root.is_dir():
        raise DatasetError(f"dataset root {root} is not a directory")
    info_path = root / INFO_PATH
    if not info_path.is_file():
        if (root / "meta" / "episodes.jsonl").is_file():
            raise UnsupportedDatasetVersionError(f"{root} is a LeRobot v2.x dataset; {_CONVERT_HINT}")
        raise DatasetNotFoundError(
            f"{root} is not a LeRobot dataset: {INFO_PATH} is missing (pass the folder that holds meta/)"
        )
    try:
        version = json.loads(info_path.read_text(encoding="utf-8")).get("codebase_version", "")
    except (OSError, ValueError, AttributeError) as exc:
        raise CorruptDatasetError(f"{info_path} is not a valid JSON object: {exc}") from exc
    if not str(version).startswith("v3."):
        raise UnsupportedDatasetVersionError(
            f"{root} has codebase_version {version!r}; steerable reads {CODEBASE_VERSION} datasets: "
            + _CONVERT_HINT
        )


class LeRobotDataset:
    """Read access to one LeRobot v3 dataset. Metadata loads eagerly; frames and video lazily."""

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root).expanduser().resolve()
        recover_folder(self.root)  # finish or undo a write that was killed mid-commit
        check_layout(self.root)
        self.info: DatasetInfo = load_info(self.root)
        self.tasks: dict[int, str] = load_tasks(self.root)
        self.episodes: list[EpisodeMeta] = load_episodes(self.root, self.info.video_keys)
        self._by_index = {e.episode_index: e for e in self.episodes}

    def __repr__(self) -> str:
        return f"LeRobotDataset({str(self.root)!r}, episodes={len(self.episodes)}, fps={self.fps})"

    # -- metadata ---------------------------------------------------------------------------
    @property
    def fps(self) -> int:
        return self.info.fps

    @property
    def features(self) -> dict[str, dict[str, Any]]:
        return self.info.features

    @property
    def camera_keys(self) -> list[str]:
        return self.info.video_keys

    @property
    def has_language(self) -> bool:
        from steerable.language.styles import LANGUAGE_COLUMNS

        return any(c in self.features for c in LANGUAGE_COLUMNS)

    @property
    def tools(self) -> list[dict[str, Any]]:
        from steerable.language.tools import tools_from_info

        return tools_from_info(self.info.to_dict())

    @cached_property
    def stats(self) -> dict[str, dict[str, Any]]:
        """`meta/stats.json` (dataset-wide feature statistics); {} when absent or unreadable."""
        path = self.root / STATS_PATH
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    @property
    def total_frames(self) -> int:
        return sum(e.length for e in self.episodes)

    def episode(self, episode_index: int) -> EpisodeMeta:
        try:
            return self._by_index[int(episode_index)]
        except KeyError:
            known = _summarize([e.episode_index for e in self.episodes])
            raise DatasetError(
                f"episode {episode_index} is not in {self.root} (episodes: {known})"
            ) from None

    def iter_episodes(self) -> Iterator[EpisodeMeta]:
        return iter(self.episodes)

    def task_of(self, ep: EpisodeMeta) -> str:
        return ep.tasks[0] if ep.tasks else ""

    # -- files ------------------------------------------------------------------------------
    def data_path(self, ep: EpisodeMeta) -> Path:
        return self.root / self.info.data_path.format(chunk_index=ep.data_chunk, file_index=ep.data_file)

    def data_files(self) -> list[Path]:
        keys = sorted({(e.data_chunk, e.data_file) for e in self.episodes})
        return [self.root / self.info.data_path.format(chunk_index=c, file_index=f) for c, f in keys]

    def video_path(self, camera: str, ep: EpisodeMeta) -> Path:
        if camera not in self.camera_keys:
            raise DatasetError(
                f"camera {camera!r} is not a video feature of {self.root} (cameras: {self.camera_keys})"
            )
        span = ep.videos.get(camera)
        if span is None or self.info.video_path is None:
            raise VideoNotFoundError(
                f"episode {ep.episode_index} has no video for camera {camera!r} in the episode metadata"
            )
        return self.root / self.info.video_path.format(
            video_key=camera, chunk_index=span.chunk_index, file_index=span.file_index
        )

    # -- frames -----------------------------------------------------------------------------
    def read_episode(self, episode_index: int, columns: Sequence[str] | None = None) -> pa.Table:
        """One episode's frame rows (sorted by frame_index), reading only the row groups it spans."""
        ep = self.episode(episode_index)
        path = self.data_path(ep)
        meta = file_metadata(path)
        names = meta.schema.to_arrow_schema().names
        if columns is not None:
            missing = [c for c in columns if c not in names]
            if missing:
                raise DatasetError(f"{path} has no column(s) {missing} (columns: {names})")
        column = names.index("episode_index")
        groups = _row_groups_for(meta, column, ep.episode_index)
        wanted = None if columns is None else list(dict.fromkeys([*columns, "episode_index"]))
        table = read_row_groups(path, groups, wanted)
        if not all(_only_episode(meta, g, column, ep.episode_index) for g in groups):
            import pyarrow.compute as pc  # only for row groups shared by several episodes

            table = table.filter(pc.equal(table.column("episode_index"), pa.scalar(ep.episode_index, pa.int64())))
        if columns is not None:
            table = table.select(list(columns))
        if table.num_rows != ep.length:
            raise CorruptDatasetError(
                f"{path} holds {table.num_rows} frames of episode {ep.episode_index}, "
                f"the metadata says {ep.length}"
            )
        return table

    def read_episode_head(self, episode_index: int, columns: Sequence[str]) -> pa.Table:
        """The episode's first stored row, `columns` only. A column that holds the same value on every
        frame (`language_persistent`) is read without decoding one copy of it per frame."""
        ep = self.episode(episode_index)
        path = self.data_path(ep)
        meta = file_metadata(path)
        names = meta.schema.to_arrow_schema().names
        column = names.index("episode_index")
        groups = _row_groups_for(meta, column, ep.episode_index)
        if groups and all(c in names for c in columns) and _only_episode(meta, groups[0], column, ep.episode_index):
            return read_first_row(path, groups[0], columns)
        return self.read_episode(episode_index, columns).slice(0, 1)

    def episode_timestamps(self, episode_index: int) -> np.ndarray:
        """The stored float32 `timestamp` of each frame, in frame order."""
        column = self.read_episode(episode_index, ["timestamp"]).column("timestamp")
        return np.asarray(column.to_numpy(), dtype=np.float32)

    def decode_frames(self, episode_index: int, camera: str, timestamps: Sequence[float], *,
                      threads: int | None = None) -> list[np.ndarray]:
        """RGB uint8 frames of `camera` at episode-relative `timestamps`, in one sequential pass
        (`threads`: the decoder's, `steerable.dataset.video.decode_frames`)."""
        from steerable.dataset.video import decode_frames

        ep = self.episode(episode_index)
        path = self.video_path(camera, ep)
        span = ep.videos[camera]
        return decode_frames(path, timestamps, offset=span.from_timestamp, episode_index=ep.episode_index,
                             threads=threads)


def _only_episode(meta: Any, group: int, column: int, episode_index: int) -> bool:
    """True when the statistics of row group `group` say it holds frames of `episode_index` only."""
    stats = meta.row_group(group).column(column).statistics
    return stats is not None and stats.has_min_max and stats.min == stats.max == episode_index


def _row_groups_for(meta: Any, column: int, episode_index: int) -> list[int]:
    """Row groups whose episode_index statistics include the episode (all, without statistics)."""
    hits: list[int] = []
    for i in range(meta.num_row_groups):
        stats = meta.row_group(i).column(column).statistics
        if stats is None or not stats.has_min_max or stats.min <= episode_index <= stats.max:
            hits.append(i)
    return hits


def _summarize(indices: list[int]) -> str:
    if not indices:
        return "none"
    if indices == list(range(indices[0], indices[-1] + 1)):
        return f"{indices[0]}..{indices[-1]}"
    return ", ".join(map(str, indices[:20])) + (" ..." if len(indices) > 20 else "")
