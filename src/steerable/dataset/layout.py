"""Path templates and constants of the LeRobot v3 on-disk layout."""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = [
    "CODEBASE_VERSION",
    "DEFAULT_CHUNK_SIZE",
    "DEFAULT_DATA_PATH",
    "DEFAULT_FEATURES",
    "DEFAULT_VIDEO_PATH",
    "EPISODES_DIR",
    "EPISODES_PATH",
    "INFO_PATH",
    "STATS_PATH",
    "TASKS_PATH",
    "PROVENANCE_KEY",
    "PROVENANCE_PATH",
    "WORK_DIR_NAME",
    "GROUND_TRUTH_PATH",
    "format_path",
]

CODEBASE_VERSION = "v3.0"
INFO_PATH = "meta/info.json"
STATS_PATH = "meta/stats.json"
TASKS_PATH = "meta/tasks.parquet"
EPISODES_DIR = "meta/episodes"
EPISODES_PATH = "meta/episodes/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
DEFAULT_DATA_PATH = "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
DEFAULT_VIDEO_PATH = "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"
DEFAULT_CHUNK_SIZE = 1000
# Our working folder inside a dataset (staging, run summaries): LeRobot ignores it, Hub pushes skip it.
WORK_DIR_NAME = ".steerable"
# Who wrote each style, per episode too, and a person's review records (`steerable.dataset.provenance`):
# a file of our own, as LeRobot warns about unknown info.json keys on every load and drops them
# whenever it rewrites info.json, but keeps unknown files under meta/ where it keeps the folder.
PROVENANCE_PATH = "meta/steerable_provenance.json"
# The info.json key older steerable versions wrote the same block under: still read, never written.
PROVENANCE_KEY = "steerable"
# Our own sidecar (LeRobot ignores unknown files under meta/).
GROUND_TRUTH_PATH = "meta/steerable_ground_truth.json"

# Per-frame columns every LeRobot v3 dataset has.
DEFAULT_FEATURES: dict[str, dict[str, Any]] = {
    "timestamp": {"dtype": "float32", "shape": [1], "names": None},
    "frame_index": {"dtype": "int64", "shape": [1], "names": None},
    "episode_index": {"dtype": "int64", "shape": [1], "names": None},
    "index": {"dtype": "int64", "shape": [1], "names": None},
    "task_index": {"dtype": "int64", "shape": [1], "names": None},
}


def format_path(root: Path, template: str, **fields: object) -> Path:
    """Fill a layout template (`data_path`, `video_path`...) and anchor it at the dataset root."""
    return root / template.format(**fields)
