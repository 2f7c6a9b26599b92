"""Language write speed: steerable's write_language vs a plain pyarrow write_table of the same tables.

Run: .venv/bin/python benchmarks/write.py [--episodes 50] [--frames 600] [--per-file 25] [--repeats 3]

A generated LeRobot v3 dataset (30 fps, 14-d state and action as fixed-size lists with HF schema
metadata, `--per-file` episodes per data shard) gets language for every episode: 8 persistent rows
(subtasks, plan, memory, task rephrasings) and 12 events (interjections with speech, VQA pairs on two
cameras). "steerable" is the whole call: validation of every row against the stored frame times,
building both columns, one row group per episode, info.json, and the folder commit (hard links for
untouched files, changed files written fresh and fsynced, one atomic switch).
"plain" writes the resulting tables with `pq.write_table` and nothing else; "a row group per episode"
does the same with LeRobot's layout, the part of the cost that the format itself asks for.
Best of --repeats.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from steerable.dataset import open_dataset
from steerable.dataset.meta import EPISODE_LOCATION_COLUMNS
from steerable.dataset.writer import EpisodeLanguage, write_language
from steerable.language import speech_row

FPS = 30
DIM = 14
CAMERAS = ("observation.images.top", "observation.images.wrist")


def _hf_metadata() -> dict[bytes, bytes]:
    vector = {"feature": {"dtype": "float32", "_type": "Value"}, "length": DIM, "_type": "List"}
    scalars = {
        "timestamp": "float32",
        "frame_index": "int64",
        "episode_index": "int64",
        "index": "int64",
        "task_index": "int64",
    }
    features = {
        "observation.state": vector,
        "action": vector,
        **{k: {"dtype": v, "_type": "Value"} for k, v in scalars.items()},
    }
    return {b"huggingface": json.dumps({"info": {"features": features}}).encode()}


def generate(root: Path, episodes: int, frames: int, per_file: int) -> None:
    """A parquet-only LeRobot v3 dataset (video features declared, files absent)."""
    rng = np.random.default_rng(0)
    vector = {"dtype": "float32", "shape": [DIM], "names": [f"j{i}" for i in range(DIM)]}
    scalar = {"dtype": "int64", "shape": [1], "names": None}
    video = {"dtype": "video", "shape": [480, 640, 3], "names": ["height", "width", "channels"]}
    features = {
        "observation.state": vector,
        "action": vector,
        **{c: video for c in CAMERAS},
        "timestamp": {"dtype": "float32", "shape": [1], "names": None},
        "frame_index": scalar,
        "episode_index": scalar,
        "index": scalar,
        "task_index": scalar,
    }
    info = {
        "codebase_version": "v3.0",
        "robot_type": "bench",
        "total_episodes": episodes,
        "total_frames": episodes * frames,
        "total_tasks": 1,
        "chunks_size": 1000,
        "fps": FPS,
        "data_path": "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet",
        "video_path": "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4",
        "features": features,
    }
    (root / "meta" / "episodes" / "chunk-000").mkdir(parents=True)
    (root / "data" / "chunk-000").mkdir(parents=True)
    (root / "meta" / "info.json").write_text(json.dumps(info, indent=4))
    pq.write_table(
        pa.table({"task_index": [0], "task": ["stack the cubes"]}), root / "meta" / "tasks.parquet"
    )
    rows: dict[str, list[Any]] = {k: [] for k in EPISODE_LOCATION_COLUMNS}
    for file_index, first in enumerate(range(0, episodes, per_file)):
        eps = range(first, min(first + per_file, episodes))
        n = len(eps) * frames
        state = rng.normal(size=(n, DIM)).astype(np.float32)
        action = rng.normal(size=(n, DIM)).astype(np.float32)
        table = pa.table(
            {
                "observation.state": pa.FixedSizeListArray.from_arrays(state.ravel(), DIM),
                "action": pa.FixedSizeListArray.from_arrays(action.ravel(), DIM),
                "timestamp": np.tile((np.arange(frames) / FPS).astype(np.float32), len(eps)),
                "frame_index": np.tile(np.arange(frames), len(eps)),
                "episode_index": np.repeat(np.array(eps), frames),
                "index": np.arange(first * frames, first * frames + n),
                "task_index": np.zeros(n, dtype=np.int64),
            }
        ).replace_schema_metadata(_hf_metadata())
        path = root / "data" / "chunk-000" / f"file-{file_index:03d}.parquet"
        with pq.ParquetWriter(path, table.schema) as writer:
            for k in range(len(eps)):
                writer.write_table(table.slice(k * frames, frames))
        for ep in eps:
            for key, value in zip(
                rows,
                (ep, ["stack the cubes"], frames, 0, file_index, ep * frames, (ep + 1) * frames),
                strict=True,
            ):
                rows[key].append(value)
    pq.write_table(pa.table(rows), root / "meta" / "episodes" / "chunk-000" / "file-000.parquet")


def language(frames: int, seed: int) -> EpisodeLanguage:
    rng = np.random.default_rng(seed)
    cuts = np.sort(rng.choice(np.arange(1, frames), size=3, replace=False))
    persistent: list[dict[str, Any]] = [
        {
            "role": "assistant",
            "content": "1. grasp red 2. place on blue 3. grasp green 4. stack",
            "style": "plan",
            "timestamp": 0.0,
        },
        *(
            {
                "role": "user",
                "content": f"please stack the cubes ({k})",
                "style": "task_aug",
                "timestamp": 0.0,
            }
            for k in range(2)
        ),
    ]
    for i, k in enumerate([0, *cuts.tolist()]):
        persistent.append(
            {"role": "assistant", "content": f"subtask {i}", "style": "subtask", "timestamp": k / FPS}
        )
    persistent.append(
        {
            "role": "assistant",
            "content": "red cube placed",
            "style": "memory",
            "timestamp": int(cuts[1]) / FPS,
        }
    )
    events: list[tuple[float, dict[str, Any]]] = []
    for k in rng.choice(np.arange(frames), size=4, replace=False).tolist():
        events.append((k / FPS, {"role": "user", "content": "a bit slower", "style": "interjection"}))
        events.append((k / FPS, speech_row("Slowing down.")))
    for k in rng.choice(np.arange(frames), size=2, replace=False).tolist():
        for camera in CAMERAS:
            events.append(
                (k / FPS, {"role": "user", "content": "How many cubes?", "style": "vqa", "camera": camera})
            )
            events.append(
                (k / FPS, {"role": "assistant", "content": '{"count": 3}', "style": "vqa", "camera": camera})
            )
    return EpisodeLanguage(persistent, events)


def best_of(repeats: int, runs: dict[str, Callable[[], object]]) -> dict[str, float]:
    """Best wall time of each run; the runs take turns so that a busy machine slows them alike."""
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(repeats):
        for name, run in runs.items():
            start = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - start)
    return {name: min(values) for name, values in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=50)
    parser.add_argument("--frames", type=int, default=600)
    parser.add_argument("--per-file", type=int, default=25)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "ds"
        generate(root, args.episodes, args.frames, args.per_file)
        ds = open_dataset(root)
        updates = {ep: language(args.frames, ep) for ep in range(args.episodes)}
        write_language(ds, updates)  # the first write adds the columns; time the steady state
        shards = ds.data_files()
        tables = [pq.read_table(p) for p in shards]
        best = best_of(
            args.repeats,
            {
                "ours": lambda: write_language(ds, updates),
                "plain": lambda: [pq.write_table(t, Path(tmp) / f"plain-{i}.parquet") for i, t in enumerate(tables)],
                "grouped": lambda: [
                    pq.write_table(t, Path(tmp) / f"grouped-{i}.parquet", row_group_size=args.frames)
                    for i, t in enumerate(tables)
                ],
            },
        )
        ours, plain, grouped = best["ours"], best["plain"], best["grouped"]
        size_mb = sum(p.stat().st_size for p in shards) / 1e6
    frames = args.episodes * args.frames
    rows = sum(len(u.persistent) + len(u.events) for u in updates.values())
    print(
        f"{args.episodes} episodes x {args.frames} frames in {len(shards)} shards ({size_mb:.1f} MB), "
        f"{rows} language rows"
    )
    print(f"{'method':<44}{'seconds':>10}{'frames/s':>12}{'vs plain':>10}")
    for name, seconds in (
        ("steerable write_language (validated, atomic)", ours),
        ("pyarrow write_table (same tables)", plain),
        ("pyarrow write_table, a row group per episode", grouped),
    ):
        print(f"{name:<44}{seconds:>10.3f}{frames / seconds:>12.0f}{seconds / plain:>9.2f}x")
    print(
        f"RESULT write_s={ours:.3f} plain_s={plain:.3f} ratio={ours / plain:.2f} grouped_s={grouped:.3f} "
        f"frames={frames} shards={len(shards)}"
    )


if __name__ == "__main__":
    main()
