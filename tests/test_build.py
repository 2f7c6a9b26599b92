"""DatasetBuilder writes what LeRobot writes: layout, schemas, row groups, videos, stats, metadata."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from shared_data import shared_dataset
from steerable.dataset import open_dataset
from steerable.dataset.build import DatasetBuilder, frame_timestamps
from steerable.dataset.stats import ImageStatsAccumulator, aggregate_stats, numeric_stats
from steerable.dataset.video import decode_frames
from steerable.errors import ConfigError, DatasetError

FPS = 10
H, W = 32, 48
LENGTHS = [12, 7, 15, 9, 11]
TASKS = ["pick the cup", "open the drawer", "pick the cup", "wipe", "open the drawer"]
FEATURES = {
    "observation.state": {"dtype": "float32", "shape": [3], "names": ["x", "y", "gripper.pos"]},
    "reward": {"dtype": "float32", "shape": [1], "names": None},
    "observation.images.cam": {"dtype": "video", "shape": [H, W, 3]},
}
INFO_KEYS = [
    "codebase_version",
    "fps",
    "features",
    "total_episodes",
    "total_frames",
    "total_tasks",
    "chunks_size",
    "data_files_size_in_mb",
    "video_files_size_in_mb",
    "data_path",
    "video_path",
    "robot_type",
    "splits",
]


def shared(name: str) -> Path:
    return shared_dataset(name)


def frame_color(index: int) -> np.ndarray:
    """A flat colour that identifies a global frame index after lossy compression."""
    return np.array([(index * 37) % 200 + 30, (index * 91) % 200 + 30, (index * 53) % 200 + 30], np.uint8)


def episode_inputs(ep: int, start: int) -> tuple[dict[str, np.ndarray], dict[str, list[np.ndarray]]]:
    n = LENGTHS[ep]
    state = np.stack([np.arange(n) + 100 * ep, -np.arange(n), np.linspace(0, 1, n)], axis=1)
    frames = [np.broadcast_to(frame_color(start + i), (H, W, 3)).copy() for i in range(n)]
    return {"observation.state": state, "reward": np.full(n, 0.5 * ep)}, {"observation.images.cam": frames}


def build(root: Path, **kwargs: object) -> Path:
    builder = DatasetBuilder(
        root, fps=FPS, features=FEATURES, robot_type="test_bot", episodes_per_file=2, **kwargs
    )
    start = 0
    for ep, task in enumerate(TASKS):
        columns, videos = episode_inputs(ep, start)
        assert builder.add_episode(task, columns, videos) == ep
        start += LENGTHS[ep]
    return builder.finalize()


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(tmp_path_factory.mktemp("built") / "ds")


def episodes_table(root: Path) -> pa.Table:
    return pq.read_table(root / "meta/episodes/chunk-000/file-000.parquet")


def test_info_json_has_lerobot_keys_in_order(built: Path) -> None:
    info = json.loads((built / "meta/info.json").read_text())
    assert list(info) == INFO_KEYS
    assert info["codebase_version"] == "v3.0"
    assert (info["total_episodes"], info["total_frames"], info["total_tasks"]) == (5, sum(LENGTHS), 3)
    assert info["splits"] == {"train": "0:5"} and info["robot_type"] == "test_bot"
    assert list(info["features"]) == [
        *FEATURES,
        "timestamp",
        "frame_index",
        "episode_index",
        "index",
        "task_index",
    ]
    cam = info["features"]["observation.images.cam"]
    assert cam["names"] == ["height", "width", "channels"]
    assert cam["info"] == {
        "video.height": H,
        "video.width": W,
        "video.codec": "h264",
        "video.pix_fmt": "yuv420p",
        "video.is_depth_map": False,
        "video.fps": FPS,
        "video.channels": 3,
        "has_audio": False,
    }
    assert info["features"]["timestamp"] == {"dtype": "float32", "shape": [1], "names": None}


def test_info_json_key_order_matches_a_real_lerobot_dataset(built: Path) -> None:
    real = json.loads((shared("lingzu_teleop_4") / "meta/info.json").read_text())
    ours = json.loads((built / "meta/info.json").read_text())
    assert list(ours) == list(real)
    assert list(ours["features"]["observation.images.cam"]["info"]) == list(real["features"]["image"]["info"])


def test_data_files_group_episodes_one_row_group_each(built: Path) -> None:
    files = sorted((built / "data/chunk-000").glob("file-*.parquet"))
    assert [f.name for f in files] == ["file-000.parquet", "file-001.parquet", "file-002.parquet"]
    per_file = [[0, 1], [2, 3], [4]]
    for path, episodes in zip(files, per_file, strict=True):
        pf = pq.ParquetFile(path)
        assert pf.num_row_groups == len(episodes)
        for rg, ep in enumerate(episodes):
            group = pf.read_row_group(rg, columns=["episode_index"]).column(0).to_pylist()
            assert set(group) == {ep} and len(group) == LENGTHS[ep]
            assert pf.metadata.row_group(rg).column(0).compression == "SNAPPY"


def test_data_schema_matches_lerobot(built: Path) -> None:
    schema = pq.read_schema(built / "data/chunk-000/file-000.parquet")
    assert schema.names == [
        "observation.state",
        "reward",
        "timestamp",
        "frame_index",
        "episode_index",
        "index",
        "task_index",
    ]
    assert schema.field("observation.state").type == pa.list_(pa.float32(), 3)
    assert schema.field("reward").type == pa.float32()
    assert schema.field("timestamp").type == pa.float32()
    assert all(
        schema.field(c).type == pa.int64() for c in ("frame_index", "episode_index", "index", "task_index")
    )
    hf = json.loads(schema.metadata[b"huggingface"])["info"]["features"]
    assert hf["observation.state"] == {
        "feature": {"dtype": "float32", "_type": "Value"},
        "length": 3,
        "_type": "List",
    }
    assert hf["reward"] == {"dtype": "float32", "_type": "Value"}
    real = json.loads(
        pq.read_schema(shared("so101_record_test") / "data/chunk-000/file-000.parquet").metadata[
            b"huggingface"
        ]
    )
    assert hf["timestamp"] == real["info"]["features"]["timestamp"]
    assert hf["observation.state"]["_type"] == real["info"]["features"]["observation.state"]["_type"]


def test_timestamps_are_stored_exactly_as_lerobot_stores_them() -> None:
    real = pq.read_table(shared("lingzu_teleop_4") / "data/chunk-000/file-000.parquet", columns=["timestamp"])
    stored = real.column("timestamp").to_numpy()
    assert stored.dtype == np.float32
    np.testing.assert_array_equal(frame_timestamps(len(stored), 30), stored)


def test_frame_rows_and_index_ranges_are_contiguous(built: Path) -> None:
    eps = episodes_table(built).to_pylist()
    data = pa.concat_tables(pq.read_table(p) for p in sorted((built / "data/chunk-000").glob("*.parquet")))
    assert data.column("index").to_pylist() == list(range(sum(LENGTHS)))
    expected_from = 0
    for row in eps:
        ep = row["episode_index"]
        assert (row["dataset_from_index"], row["dataset_to_index"]) == (
            expected_from,
            expected_from + LENGTHS[ep],
        )
        assert row["length"] == LENGTHS[ep] and row["tasks"] == [TASKS[ep]]
        assert (row["data/chunk_index"], row["data/file_index"]) == (0, ep // 2)
        expected_from += LENGTHS[ep]
        rows = data.filter(pa.compute.equal(data.column("episode_index"), ep))
        assert rows.column("frame_index").to_pylist() == list(range(LENGTHS[ep]))
        np.testing.assert_array_equal(rows.column("timestamp").to_numpy(), frame_timestamps(LENGTHS[ep], FPS))
        state = np.array(rows.column("observation.state").to_pylist(), dtype=np.float32)
        np.testing.assert_array_equal(state, episode_inputs(ep, 0)[0]["observation.state"].astype(np.float32))


def test_episodes_parquet_columns_follow_lerobot(built: Path) -> None:
    names = episodes_table(built).column_names
    assert names[:7] == [
        "episode_index",
        "tasks",
        "length",
        "data/chunk_index",
        "data/file_index",
        "dataset_from_index",
        "dataset_to_index",
    ]
    assert names[7:11] == [
        f"videos/observation.images.cam/{p}"
        for p in ("chunk_index", "file_index", "from_timestamp", "to_timestamp")
    ]
    assert names[-2:] == ["meta/episodes/chunk_index", "meta/episodes/file_index"]
    stats = [n for n in names if n.startswith("stats/")]
    assert stats[:5] == [f"stats/observation.state/{s}" for s in ("min", "max", "mean", "std", "count")]
    # Same stat columns and types as a dataset recorded with LeRobot, for the features both have.
    real = pq.read_schema(shared("so101_record_test") / "meta/episodes/chunk-000/file-000.parquet")
    ours = episodes_table(built).schema
    for feature, real_feature in [
        ("observation.state", "observation.state"),
        ("frame_index", "frame_index"),
        ("observation.images.cam", "observation.images.top"),
    ]:
        ours_cols = [n.split("/")[-1] for n in names if n.startswith(f"stats/{feature}/")]
        real_cols = [n.split("/")[-1] for n in real.names if n.startswith(f"stats/{real_feature}/")]
        assert ours_cols == real_cols
        for stat in ours_cols:
            assert (
                ours.field(f"stats/{feature}/{stat}").type == real.field(f"stats/{real_feature}/{stat}").type
            )


def test_video_spans_locate_each_episode_in_shared_mp4s(built: Path) -> None:
    start = 0
    previous_to: dict[int, float] = {}
    for row in episodes_table(built).to_pylist():
        ep, key = row["episode_index"], "videos/observation.images.cam"
        file_index, t0, t1 = (
            row[f"{key}/file_index"],
            row[f"{key}/from_timestamp"],
            row[f"{key}/to_timestamp"],
        )
        assert file_index == ep // 2
        assert t0 == previous_to.get(file_index, 0.0)
        assert t1 - t0 == pytest.approx(LENGTHS[ep] / FPS)
        previous_to[file_index] = t1
        path = built / f"videos/observation.images.cam/chunk-000/file-{file_index:03d}.mp4"
        times = [0.0, (LENGTHS[ep] - 1) / FPS, 3 / FPS]
        frames = decode_frames(path, times, offset=t0, episode_index=ep)
        for t, frame in zip(times, frames, strict=True):
            want = frame_color(start + round(t * FPS)).astype(int)
            assert np.abs(frame.reshape(-1, 3).mean(axis=0) - want).max() < 6
        start += LENGTHS[ep]


def test_stats_per_episode_and_aggregated(built: Path) -> None:
    row = episodes_table(built).to_pylist()[2]
    state = episode_inputs(2, 0)[0]["observation.state"].astype(np.float32)
    assert row["stats/observation.state/min"] == pytest.approx(state.min(axis=0).tolist())
    assert row["stats/observation.state/max"] == pytest.approx(state.max(axis=0).tolist())
    assert row["stats/observation.state/count"] == [LENGTHS[2]]
    assert row["stats/frame_index/max"] == [LENGTHS[2] - 1]
    stats = json.loads((built / "meta/stats.json").read_text())
    assert list(stats) == [*FEATURES, "timestamp", "frame_index", "episode_index", "index", "task_index"]
    assert stats["index"]["min"] == [0] and stats["index"]["max"] == [sum(LENGTHS) - 1]
    assert stats["index"]["count"] == [sum(LENGTHS)]
    assert stats["index"]["mean"] == pytest.approx([(sum(LENGTHS) - 1) / 2])
    assert stats["index"]["std"] == pytest.approx([np.arange(sum(LENGTHS)).std()])
    all_colors = np.stack([frame_color(i) for i in range(sum(LENGTHS))]) / 255
    cam = stats["observation.images.cam"]
    assert np.array(cam["mean"]).shape == (3, 1, 1)
    assert np.array(cam["mean"]).ravel() == pytest.approx(all_colors.mean(axis=0), abs=0.02)
    assert np.array(cam["max"]).ravel() == pytest.approx(all_colors.max(axis=0), abs=0.02)


def test_image_stats_match_numpy_over_the_pixels() -> None:
    rng = np.random.default_rng(3)
    frames = rng.integers(0, 256, size=(5, 9, 11, 3), dtype=np.uint8)
    acc = ImageStatsAccumulator()
    for f in frames:
        acc.add(f)
    got = acc.stats()
    pixels = frames.reshape(-1, 3) / 255.0
    np.testing.assert_allclose(got["mean"].ravel(), pixels.mean(axis=0))
    np.testing.assert_allclose(got["std"].ravel(), pixels.std(axis=0))
    for name, q in [("q01", 0.01), ("q50", 0.5), ("q99", 0.99)]:
        np.testing.assert_allclose(got[name].ravel(), np.quantile(pixels, q, axis=0))
    assert got["count"].tolist() == [5]


def test_aggregated_stats_equal_stats_of_all_frames() -> None:
    rng = np.random.default_rng(4)
    parts = [rng.normal(i, 1 + i, size=(n, 2)) for i, n in enumerate([5, 40, 13])]
    pooled = aggregate_stats([numeric_stats(p) for p in parts])
    everything = np.concatenate(parts)
    np.testing.assert_allclose(pooled["mean"], everything.mean(axis=0))
    np.testing.assert_allclose(pooled["std"], everything.std(axis=0))
    np.testing.assert_allclose(pooled["min"], everything.min(axis=0))
    assert pooled["count"].tolist() == [58]


def test_tasks_parquet_is_a_pandas_frame_indexed_by_task(built: Path) -> None:
    df = pd.read_parquet(built / "meta/tasks.parquet")
    assert df.index.name == "task"
    assert df["task_index"].to_dict() == {"pick the cup": 0, "open the drawer": 1, "wipe": 2}
    schema = pq.read_schema(built / "meta/tasks.parquet")
    assert schema.names == ["task_index", "task"] and schema.field("task").type == pa.string()
    assert json.loads(schema.metadata[b"pandas"])["index_columns"] == ["task"]


def test_tasks_parquet_without_pandas_reads_the_same(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pandas", None)  # `import pandas` now raises ImportError
    root = build(tmp_path / "nopandas")
    monkeypatch.undo()
    df = pd.read_parquet(root / "meta/tasks.parquet")
    assert df.index.name == "task"
    assert df["task_index"].to_dict() == {"pick the cup": 0, "open the drawer": 1, "wipe": 2}
    assert pq.read_schema(root / "meta/tasks.parquet").names == ["task_index", "task"]


def test_reader_opens_the_built_dataset(built: Path) -> None:
    ds = open_dataset(built)
    assert ds.fps == FPS and ds.camera_keys == ["observation.images.cam"]
    assert ds.tasks == {0: "pick the cup", 1: "open the drawer", 2: "wipe"}
    assert [e.length for e in ds.episodes] == LENGTHS
    table = ds.read_episode(3, ["frame_index", "reward"])
    assert table.column("reward").to_pylist() == [1.5] * LENGTHS[3]
    (frame,) = ds.decode_frames(3, "observation.images.cam", [2 / FPS])
    start = sum(LENGTHS[:3])
    assert np.abs(frame.reshape(-1, 3).mean(axis=0) - frame_color(start + 2)).max() < 6


def test_refuses_to_build_over_an_existing_dataset(built: Path) -> None:
    with pytest.raises(DatasetError, match="already holds a dataset"):
        DatasetBuilder(built, fps=FPS, features=FEATURES, robot_type=None)


@pytest.mark.parametrize(
    "features",
    [
        {"timestamp": {"dtype": "float32", "shape": [1]}},
        {"img": {"dtype": "video", "shape": [32, 48]}},
        {"x": {"dtype": "string", "shape": [1]}},
        {"only.a.camera": {"dtype": "video", "shape": [32, 48, 3]}},
    ],
)
def test_rejects_unsupported_features(tmp_path: Path, features: dict) -> None:
    with pytest.raises(ConfigError):
        DatasetBuilder(tmp_path, fps=FPS, features=features, robot_type=None)


def test_bad_episode_inputs_are_refused_and_leave_no_temp_files(tmp_path: Path) -> None:
    root = tmp_path / "ds"
    columns, videos = episode_inputs(0, 0)
    builder = DatasetBuilder(root, fps=FPS, features=FEATURES, robot_type=None)
    with pytest.raises(DatasetError, match="columns"):
        builder.add_episode("t", {"observation.state": columns["observation.state"]}, videos)
    with pytest.raises(DatasetError, match="empty"):
        builder.add_episode("", columns, videos)
    with pytest.raises(DatasetError, match="shape"):
        builder.add_episode("wrong dims", {**columns, "observation.state": np.zeros((12, 4))}, videos)
    assert builder.add_episode("right dims", columns, videos) == 0
    builder.finalize()
    assert open_dataset(root).tasks == {0: "right dims"}, "refused episodes leave no trace"
    with pytest.raises(DatasetError, match="no episodes"):
        DatasetBuilder(root / "empty", fps=FPS, features=FEATURES, robot_type=None).finalize()
    short = {"observation.images.cam": videos["observation.images.cam"][:-1]}
    builder = DatasetBuilder(root / "short", fps=FPS, features=FEATURES, robot_type=None)
    with pytest.raises(DatasetError, match="frames"), builder:
        builder.add_episode("t", columns, short)
    assert not list((root / "short").rglob("*.tmp")), "an aborted build must not leave temp files"
    assert not (root / "short" / "meta" / "info.json").exists()


def test_truncate_keeps_whole_finished_file_groups_after_a_failed_episode(tmp_path: Path) -> None:
    """An episode whose video fails part way: `truncate` drops it, and what shares its open files, and
    `finalize` writes a dataset of the episodes before it (what a recording on a full disk keeps)."""
    root = tmp_path / "ds"
    builder = DatasetBuilder(root, fps=FPS, features=FEATURES, robot_type=None, episodes_per_file=2)
    start = 0
    for ep in range(3):
        columns, videos = episode_inputs(ep, start)
        builder.add_episode(TASKS[ep], columns, videos)
        start += LENGTHS[ep]
    columns, videos = episode_inputs(3, start)

    def frames_then_a_full_disk():
        yield from videos["observation.images.cam"][:4]
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError):
        builder.add_episode(TASKS[3], columns, {"observation.images.cam": frames_then_a_full_disk()})
    assert builder.truncate(4) == 2, "episode 2 shares the unfinished files of episode 3"
    builder.finalize()
    ds = open_dataset(root)
    assert ds.info.total_episodes == 2 and ds.info.total_frames == LENGTHS[0] + LENGTHS[1]
    assert ds.tasks == {0: TASKS[0], 1: TASKS[1]}
    assert [p.name for p in (root / "data" / "chunk-000").iterdir()] == ["file-000.parquet"]
    assert [p.name for p in (root / "videos" / "observation.images.cam" / "chunk-000").iterdir()] == ["file-000.mp4"]
    last = (LENGTHS[0] + LENGTHS[1] - 1) / FPS  # the kept episodes' last frame decodes
    assert len(decode_frames(root / "videos/observation.images.cam/chunk-000/file-000.mp4", [last])) == 1
    assert [p.name for p in tmp_path.iterdir()] == ["ds"]
