"""Write a NEW LeRobot v3 dataset episode by episode, in the layout LeRobot itself produces.

Several episodes share each data parquet (one row group per episode) and each camera's mp4
(episodes back to back, located by from/to timestamps). `finalize` writes the metadata, with
`meta/info.json` last. The dataset is built in a hidden folder beside `root` and switched in by
one folder commit at `finalize` (`steerable.dataset.commit`): `root` is absent, as it was, or complete.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from steerable.dataset.atomic import atomic_path, atomic_write_json
from steerable.dataset.build_features import ARROW_TYPES, check_features, data_schema
from steerable.dataset.commit import FolderCommit
from steerable.dataset.info import DatasetInfo, write_info
from steerable.dataset.layout import (
    CODEBASE_VERSION,
    DEFAULT_CHUNK_SIZE,
    DEFAULT_DATA_PATH,
    DEFAULT_FEATURES,
    DEFAULT_VIDEO_PATH,
    EPISODES_PATH,
    INFO_PATH,
    STATS_PATH,
    TASKS_PATH,
)
from steerable.dataset.stats import (
    ImageStatsAccumulator,
    aggregate_stats,
    numeric_stats,
    sample_frame_indices,
    stats_to_lists,
)
from steerable.dataset.tasks_table import tasks_table
from steerable.dataset.video import VideoWriter
from steerable.errors import ConfigError, DatasetError

__all__ = ["DatasetBuilder", "frame_timestamps"]

_VIDEO_CODECS = ("h264", "av1")


def frame_timestamps(length: int, fps: int) -> np.ndarray:
    """Episode-relative frame times as LeRobot stores them: frame_index / fps in double, then float32."""
    return (np.arange(length, dtype=np.float64) / fps).astype(np.float32)


class DatasetBuilder:
    """Builds a LeRobot v3 dataset under `root` (which must not hold one yet).

    `features` maps each non-default feature to {"dtype", "shape", "names"}: numeric dtypes with
    shape [n] become columns, dtype "video" with shape [height, width, 3] becomes an mp4 per camera.
    Used as a context manager, a clean exit finalizes and an exception discards unfinished files.
    Files are written under `build_dir` until `finalize` commits them to `root`.
    """

    def __init__(
        self,
        root: Path,
        *,
        fps: int,
        features: dict[str, dict[str, Any]],
        robot_type: str | None,
        episodes_per_file: int = 10,
        video_codec: str = "h264",
        video_crf: int = 23,
    ) -> None:
        if fps <= 0 or episodes_per_file <= 0:
            raise ConfigError(
                f"fps and episodes_per_file must be positive, got {fps} and {episodes_per_file}"
            )
        if video_codec not in _VIDEO_CODECS:
            raise ConfigError(f"video_codec must be one of {_VIDEO_CODECS}, got {video_codec!r}")
        self.root = Path(root)
        if (self.root / INFO_PATH).exists():
            raise DatasetError(f"{self.root} already holds a dataset; build into a new or empty folder")
        self.fps, self.robot_type, self.episodes_per_file = fps, robot_type, episodes_per_file
        self.video_codec, self.video_crf = video_codec, video_crf
        self.features = check_features(features, fps=fps, video_codec=video_codec)
        self.video_keys = [k for k, f in self.features.items() if f["dtype"] == "video"]
        self.column_keys = [k for k in self.features if k not in self.video_keys]
        if not self.column_keys:
            raise ConfigError(
                "declare at least one non-video feature (e.g. the state): it sets episode lengths"
            )
        self._schema = data_schema({k: self.features[k] for k in self.column_keys})
        self._tasks: dict[str, int] = {}
        self._episodes: list[dict[str, Any]] = []
        self._stats: list[dict[str, dict[str, np.ndarray]]] = []
        self._frames = 0
        self._file_number = -1  # files are numbered across chunks; -1: none open yet
        self._finished = 0  # episodes whose files are all finished (those of the open file group are not)
        self._group_tables: list[pa.Table] = []
        self._group_video_frames: dict[str, int] = {}
        self._writers: dict[str, VideoWriter] = {}
        self._open = contextlib.ExitStack()
        self._finalized = False
        self._commit: FolderCommit | None = None

    @property
    def build_dir(self) -> Path:
        """Where the files are written until `finalize` switches them in at `root`."""
        if self._commit is None:
            self._commit = FolderCommit(self.root)
        return self._commit.root

    # -- episodes ---------------------------------------------------------------------------
    def add_episode(
        self,
        task: str,
        columns: dict[str, np.ndarray],
        videos: dict[str, Iterable[np.ndarray]] | None = None,
    ) -> int:
        """Append one episode (frame columns + camera frames); returns its episode index."""
        if self._finalized:
            raise DatasetError(f"{self.root} is already finalized; start a new DatasetBuilder")
        episode = len(self._episodes)
        values = self._typed_columns(episode, task, columns, videos or {})
        length = len(next(iter(values.values())))
        if not self._group_tables:
            self._next_file()
        chunk, file = divmod(self._file_number, DEFAULT_CHUNK_SIZE)
        task_index = self._tasks.setdefault(task, len(self._tasks))
        table = self._episode_table(episode, task_index, values, length)
        self._group_tables.append(table)
        stats = {k: numeric_stats(v) for k, v in values.items()}
        row: dict[str, Any] = {
            "episode_index": episode,
            "tasks": [task],
            "length": length,
            "data/chunk_index": chunk,
            "data/file_index": file,
            "dataset_from_index": self._frames,
            "dataset_to_index": self._frames + length,
        }
        for key in self.video_keys:
            start = self._group_video_frames.get(key, 0)
            stats[key] = self._encode(episode, key, (videos or {})[key], length, chunk, file)
            row[f"videos/{key}/chunk_index"] = chunk
            row[f"videos/{key}/file_index"] = file
            row[f"videos/{key}/from_timestamp"] = start / self.fps
            row[f"videos/{key}/to_timestamp"] = (start + length) / self.fps
        for name in DEFAULT_FEATURES:
            stats[name] = numeric_stats(table.column(name).to_numpy())
        self._stats.append({k: stats[k] for k in (*self.features, *DEFAULT_FEATURES)})
        self._episodes.append(row)
        self._frames += length
        if len(self._group_tables) == self.episodes_per_file:
            self._close_file()  # a full group is finished now, not when the next episode comes
        return episode

    def _typed_columns(
        self, episode: int, task: str, columns: dict[str, np.ndarray], videos: dict[str, Iterable[np.ndarray]]
    ) -> dict[str, np.ndarray]:
        """Check an episode's inputs before anything is written; return (n, dim) arrays as stored."""
        if not task:
            raise DatasetError(f"episode {episode}: the task string is empty")
        if set(columns) != set(self.column_keys):
            raise DatasetError(
                f"episode {episode}: columns {sorted(columns)} != features {sorted(self.column_keys)}"
            )
        if set(videos) != set(self.video_keys):
            raise DatasetError(
                f"episode {episode}: videos {sorted(videos)} != cameras {sorted(self.video_keys)}"
            )
        typed = {k: np.asarray(columns[k], dtype=self.features[k]["dtype"]) for k in self.column_keys}
        lengths = {len(v) for v in typed.values()}
        if len(lengths) > 1 or 0 in lengths:
            raise DatasetError(f"episode {episode}: columns have different or zero lengths {sorted(lengths)}")
        n = lengths.pop()
        for key, values in typed.items():
            dims = self.features[key]["shape"][0]
            if values.size != n * dims:
                raise DatasetError(
                    f"episode {episode}: {key!r} has shape {values.shape}, expected ({n}, {dims})"
                )
            typed[key] = values.reshape(n, dims)
        return typed

    def _episode_table(
        self, episode: int, task_index: int, values: dict[str, np.ndarray], n: int
    ) -> pa.Table:
        arrays: list[pa.Array] = []
        for key in self.column_keys:
            spec = self.features[key]
            flat = pa.array(values[key].ravel(), type=ARROW_TYPES[spec["dtype"]])
            arrays.append(
                flat if spec["shape"] == [1] else pa.FixedSizeListArray.from_arrays(flat, spec["shape"][0])
            )
        frame_index = np.arange(n, dtype=np.int64)
        arrays += [
            pa.array(frame_timestamps(n, self.fps)),
            pa.array(frame_index),
            pa.array(np.full(n, episode, dtype=np.int64)),
            pa.array(frame_index + self._frames),
            pa.array(np.full(n, task_index, dtype=np.int64)),
        ]
        return pa.Table.from_arrays(arrays, schema=self._schema)

    def _encode(
        self, episode: int, key: str, frames: Iterable[np.ndarray], length: int, chunk: int, file: int
    ) -> dict[str, np.ndarray]:
        height, width = self.features[key]["shape"][:2]
        writer = self._writers.get(key)
        if writer is None:
            path = self.build_dir / DEFAULT_VIDEO_PATH.format(video_key=key, chunk_index=chunk, file_index=file)
            # One encoder thread: libx264's automatic threading varies the bitstream run to run far more
            # often than one thread does, and for the small frames of generated and recorded datasets
            # one thread is no slower on two cores.
            writer = VideoWriter(path, self.fps, width, height, codec=self.video_codec, crf=self.video_crf,
                                 threads=1)
            self._writers[key] = self._open.enter_context(writer)
        sampled = set(sample_frame_indices(length).tolist())
        acc = ImageStatsAccumulator()
        count = 0
        for i, frame in enumerate(frames):
            if frame.shape != (height, width, 3) or frame.dtype != np.uint8:
                raise DatasetError(
                    f"episode {episode}, {key}: frame {i} is {frame.shape} {frame.dtype}, "
                    f"expected ({height}, {width}, 3) uint8"
                )
            writer.write(frame)
            if i in sampled:
                acc.add(frame)
            count += 1
        if count != length:
            raise DatasetError(f"episode {episode}, {key}: got {count} frames for {length} rows of data")
        self._group_video_frames[key] = self._group_video_frames.get(key, 0) + count
        return acc.stats()

    def _next_file(self) -> None:
        self._close_file()
        self._file_number += 1

    def _close_file(self) -> None:
        """Finish the open data parquet and mp4s of the current file group."""
        if not self._group_tables:
            return
        chunk, file = divmod(self._file_number, DEFAULT_CHUNK_SIZE)
        path = self.build_dir / DEFAULT_DATA_PATH.format(chunk_index=chunk, file_index=file)
        with atomic_path(path) as tmp, pq.ParquetWriter(tmp, self._schema, compression="snappy") as pw:
            for table in self._group_tables:
                pw.write_table(table, row_group_size=table.num_rows)  # one row group per episode
        self._open.close()  # finishes and renames every mp4 of the group
        self._open = contextlib.ExitStack()
        self._writers.clear()
        self._group_tables = []
        self._group_video_frames = {}
        self._finished = len(self._episodes)

    def truncate(self, keep: int) -> int:
        """Keep the first `keep` episodes, or fewer: whole file groups whose files are all finished.

        The files of the others, finished or half-written, are deleted from `build_dir`, so that
        `finalize` writes a dataset of the episodes kept (after a write failed: a recording on a full
        disk keeps what it had finished, and makes room by dropping its newest). Returns how many are kept.
        """
        keep = max(0, min(keep, self._finished))
        groups = [row["data/chunk_index"] * DEFAULT_CHUNK_SIZE + row["data/file_index"] for row in self._episodes]
        while 0 < keep < len(groups) and groups[keep] == groups[keep - 1]:
            keep -= 1
        with contextlib.suppress(Exception):  # the open group's writers drop their temp files
            self._open.__exit__(DatasetError, DatasetError("dropped"), None)
        last = groups[keep - 1] if keep else -1
        for number in range(last + 1, self._file_number + 1):
            chunk, file = divmod(number, DEFAULT_CHUNK_SIZE)
            paths = [DEFAULT_DATA_PATH.format(chunk_index=chunk, file_index=file)]
            paths += [DEFAULT_VIDEO_PATH.format(video_key=k, chunk_index=chunk, file_index=file)
                      for k in self.video_keys]
            if self._commit is not None:  # None: no file was written yet
                for rel in paths:
                    (self._commit.root / rel).unlink(missing_ok=True)
        self._open, self._file_number, self._finished = contextlib.ExitStack(), last, keep
        self._writers.clear()
        self._group_tables, self._group_video_frames = [], {}
        self._episodes, self._stats = self._episodes[:keep], self._stats[:keep]
        self._frames = sum(row["length"] for row in self._episodes)
        used = {task for row in self._episodes for task in row["tasks"]}
        self._tasks = {task: index for task, index in self._tasks.items() if task in used}  # a prefix: 0..m-1
        return keep

    # -- metadata ---------------------------------------------------------------------------
    def finalize(self, *, keep_on_error: bool = False) -> Path:
        """Close the last files, write episodes, tasks, stats and info.json, and commit them to `root`.

        A failure drops everything written (`root` stays as it was); with `keep_on_error` the files
        stay in `build_dir`, so that `truncate` can make room and `finalize` try again (or `abort`).
        """
        if self._finalized:
            return self.root
        if not self._episodes:
            self.abort()
            raise DatasetError(f"no episodes were added to {self.root}; nothing to finalize")
        try:
            self._write_metadata()
            assert self._commit is not None  # opened by the first episode's files
            self._commit.commit(keep_on_error=keep_on_error)
        except BaseException:
            if not keep_on_error:
                self.abort()
            raise
        self._finalized = True
        return self.root

    def abort(self) -> None:
        """Drop everything written so far; `root` stays as it was."""
        self._open.close()
        if self._commit is not None:
            self._commit.abort()
            self._commit = None

    def _write_metadata(self) -> None:
        self._close_file()
        self._write_episodes()
        self._write_tasks()
        per_feature = {k: aggregate_stats([s[k] for s in self._stats]) for k in self._stats[0]}
        atomic_write_json(self.build_dir / STATS_PATH, {k: stats_to_lists(v) for k, v in per_feature.items()})
        info = DatasetInfo(
            codebase_version=CODEBASE_VERSION,
            fps=self.fps,
            features={**self.features, **DEFAULT_FEATURES},
            total_episodes=len(self._episodes),
            total_frames=self._frames,
            total_tasks=len(self._tasks),
            chunks_size=DEFAULT_CHUNK_SIZE,
            data_path=DEFAULT_DATA_PATH,
            video_path=DEFAULT_VIDEO_PATH if self.video_keys else None,
            robot_type=self.robot_type,
            splits={"train": f"0:{len(self._episodes)}"},
        )
        write_info(self.build_dir, info)

    def _write_episodes(self) -> None:
        rows = []
        for row, stats in zip(self._episodes, self._stats, strict=True):
            full = dict(row)
            for feature, values in stats.items():
                for stat, value in stats_to_lists(values).items():
                    full[f"stats/{feature}/{stat}"] = value
            full["meta/episodes/chunk_index"] = 0
            full["meta/episodes/file_index"] = 0
            rows.append(full)
        table = pa.Table.from_pylist(rows)
        with atomic_path(self.build_dir / EPISODES_PATH.format(chunk_index=0, file_index=0)) as tmp:
            pq.write_table(table, tmp, compression="snappy")

    def _write_tasks(self) -> None:
        table = tasks_table(list(self._tasks), list(self._tasks.values()))
        with atomic_path(self.build_dir / TASKS_PATH) as tmp:
            pq.write_table(table, tmp, compression="snappy")

    # -- context manager --------------------------------------------------------------------
    def __enter__(self) -> DatasetBuilder:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc is None:
            self.finalize()
        else:
            try:
                self._open.__exit__(exc_type, exc, tb)  # the video writers drop their temp files
            finally:
                self.abort()
