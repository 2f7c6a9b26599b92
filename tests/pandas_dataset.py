"""Builds a small LeRobot v3 dataset the way pandas-based tools write it.

Plain `list<double>` feature columns and pandas schema metadata instead of LeRobot's
fixed_size_list + `huggingface` metadata; tasks with the string as a `task` pandas index. No videos.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd


def make_pandas_dataset(
    root: Path, *, episodes: int = 3, frames: int = 20, fps: int = 10, per_file: int = 2
) -> Path:
    rng = np.random.default_rng(0)
    names = ["x", "y", "z", "gripper"]
    ep_rows = []
    index = 0
    for file_index, first in enumerate(range(0, episodes, per_file)):
        parts = []
        for ep in range(first, min(first + per_file, episodes)):
            n = frames + ep
            parts.append(
                pd.DataFrame(
                    {
                        "observation.state": [list(rng.normal(size=4)) for _ in range(n)],
                        "action": [list(rng.normal(size=4)) for _ in range(n)],
                        "timestamp": (np.arange(n, dtype=np.float32) / np.float32(fps)).astype(np.float32),
                        "frame_index": np.arange(n, dtype=np.int64),
                        "episode_index": np.full(n, ep, dtype=np.int64),
                        "index": np.arange(index, index + n, dtype=np.int64),
                        "task_index": np.full(n, ep % 2, dtype=np.int64),
                    }
                )
            )
            ep_rows.append(
                {
                    "episode_index": ep,
                    "tasks": [f"task number {ep % 2}"],
                    "length": n,
                    "data/chunk_index": 0,
                    "data/file_index": file_index,
                    "dataset_from_index": index,
                    "dataset_to_index": index + n,
                    "meta/episodes/chunk_index": 0,
                    "meta/episodes/file_index": 0,
                }
            )
            index += n
        path = root / "data" / "chunk-000" / f"file-{file_index:03d}.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        pd.concat(parts, ignore_index=True).to_parquet(path, index=False)
    meta = root / "meta"
    (meta / "episodes" / "chunk-000").mkdir(parents=True, exist_ok=True)
    pd.DataFrame(ep_rows).to_parquet(meta / "episodes" / "chunk-000" / "file-000.parquet", index=False)
    tasks = pd.DataFrame({"task_index": [0, 1]}, index=pd.Index(["task number 0", "task number 1"], name="task"))
    tasks.to_parquet(meta / "tasks.parquet")
    vec = {"dtype": "float32", "shape": [4], "names": names}
    scalar = {"dtype": "float32", "shape": [1], "names": None}
    integer = {"dtype": "int64", "shape": [1], "names": None}
    info = {
        "codebase_version": "v3.0",
        "fps": fps,
        "features": {
            "observation.state": vec,
            "action": vec,
            "timestamp": scalar,
            "frame_index": integer,
            "episode_index": integer,
            "index": integer,
            "task_index": integer,
        },
        "total_episodes": episodes,
        "total_frames": index,
        "total_tasks": 2,
        "chunks_size": 1000,
        "data_path": "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet",
        "video_path": None,
        "robot_type": "pandas_bot",
        "splits": {"train": f"0:{episodes}"},
        "some_future_key": {"kept": True},
    }
    (meta / "info.json").write_text(json.dumps(info, indent=4))
    return root
