"""Reading LeRobot v3 datasets written by LeRobot and by pandas; bad layouts give clear errors."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from pandas_dataset import make_pandas_dataset
from steerable.dataset import DatasetInfo, open_dataset
from steerable.dataset import parquet as parquet_gateway
from steerable.dataset.frames import feature_matrix, vector_names
from steerable.errors import (
    CorruptDatasetError,
    DatasetError,
    DatasetNotFoundError,
    UnsupportedDatasetVersionError,
    VideoNotFoundError,
)


def test_reads_lerobot_fixture_with_one_file_per_episode(lingzu: Path) -> None:
    ds = open_dataset(lingzu)
    assert ds.fps == 30
    assert ds.camera_keys == ["image"]
    assert ds.tasks == {0: "lingzu teleoperation"}
    assert [e.episode_index for e in ds.episodes] == [0, 1, 2, 3]
    assert [e.data_file for e in ds.episodes] == [0, 3, 4, 5]  # non-contiguous file indices
    assert ds.total_frames == 1700
    for ep in ds.episodes:
        table = ds.read_episode(ep.episode_index, ["frame_index", "timestamp", "state"])
        assert table.column_names == ["frame_index", "timestamp", "state"]
        assert table.column("frame_index").to_pylist() == list(range(ep.length))
        state = feature_matrix(table, "state")
        assert state.shape == (ep.length, 34)
        ts = ds.episode_timestamps(ep.episode_index)
        assert ts.dtype == np.float32 and ts[0] == 0.0
        np.testing.assert_allclose(ts, np.arange(ep.length) / 30, atol=1e-5)
        assert ds.video_path("image", ep).is_file()


def test_reads_shared_file_with_row_group_per_episode(so101: Path, monkeypatch) -> None:
    ds = open_dataset(so101)
    assert ds.tasks == {0: "Pick the orange cube and place it in the box"}  # pandas index column
    assert ds.camera_keys == ["observation.images.front", "observation.images.top"]
    seen: list[list[int]] = []
    original = parquet_gateway.read_row_groups

    def spy(path, groups, columns):
        seen.append(list(groups))
        return original(path, groups, columns)

    monkeypatch.setattr("steerable.dataset.lerobot.read_row_groups", spy)
    all_index: list[int] = []
    for ep in ds.episodes:
        table = ds.read_episode(ep.episode_index, ["index", "episode_index", "action"])
        assert set(table.column("episode_index").to_pylist()) == {ep.episode_index}
        assert table.column("index").to_pylist() == list(range(ep.from_index, ep.to_index))
        assert feature_matrix(table, "action").shape == (ep.length, 6)
        all_index += table.column("index").to_pylist()
    # All four episodes share one file; each read touches only its own row group.
    assert seen == [[0], [1], [2], [3]]
    assert all_index == list(range(1492))
    names = vector_names(ds.features["observation.state"], 6)
    assert "gripper.pos" in names


def test_reads_pandas_written_dataset(tmp_path: Path) -> None:
    ds = open_dataset(make_pandas_dataset(tmp_path / "pd", episodes=3, frames=20))
    assert ds.tasks == {0: "task number 0", 1: "task number 1"}
    assert ds.camera_keys == []
    table = ds.read_episode(1, ["observation.state", "timestamp"])
    assert feature_matrix(table, "observation.state").shape == (21, 4)
    assert ds.info.to_dict()["some_future_key"] == {"kept": True}


def test_info_round_trip_keeps_unknown_keys_and_order(lingzu: Path) -> None:
    raw = json.loads((lingzu / "meta" / "info.json").read_text())
    info = DatasetInfo.from_dict(raw)
    assert list(info.to_dict()) == list(raw)
    assert info.to_dict() == raw
    info.tools = [{"type": "function", "function": {"name": "say"}}]
    assert info.to_dict()["tools"][0]["function"]["name"] == "say"


def test_video_path_of_missing_file_names_file(so101: Path) -> None:
    ds = open_dataset(so101)
    with pytest.raises(VideoNotFoundError, match=r"file-000\.mp4.*episode 2|episode 2.*file-000\.mp4"):
        ds.decode_frames(2, "observation.images.front", [0.0])


def test_missing_root(tmp_path: Path) -> None:
    with pytest.raises(DatasetNotFoundError, match="does not exist"):
        open_dataset(tmp_path / "nope")


def test_not_a_dataset(tmp_path: Path) -> None:
    (tmp_path / "x").mkdir()
    with pytest.raises(DatasetNotFoundError, match="not a LeRobot dataset"):
        open_dataset(tmp_path / "x")


def test_v21_layout_says_how_to_convert(tmp_path: Path) -> None:
    root = tmp_path / "old"
    (root / "meta").mkdir(parents=True)
    (root / "meta" / "info.json").write_text(json.dumps({"codebase_version": "v2.1", "fps": 30, "features": {}}))
    (root / "meta" / "episodes.jsonl").write_text("{}\n")
    with pytest.raises(UnsupportedDatasetVersionError, match="v2.1.*convert"):
        open_dataset(root)


def test_corrupt_parquet_names_the_file(writable_copy) -> None:
    root = writable_copy("so101_record_test")
    shard = root / "data" / "chunk-000" / "file-000.parquet"
    shard.write_bytes(b"PAR1 this is not parquet")
    ds = open_dataset(root)
    with pytest.raises(CorruptDatasetError, match=r"file-000\.parquet"):
        ds.read_episode(0)


def test_corrupt_info_json(writable_copy) -> None:
    root = writable_copy("lingzu_teleop_4")
    (root / "meta" / "info.json").write_text("{not json")
    with pytest.raises(CorruptDatasetError, match="info.json"):
        open_dataset(root)


def test_missing_data_file_and_unknown_episode(writable_copy) -> None:
    root = writable_copy("lingzu_teleop_4")
    ds = open_dataset(root)
    with pytest.raises(DatasetError, match="episode 9 is not in"):
        ds.read_episode(9)
    (root / "data" / "chunk-000" / "file-003.parquet").unlink()
    with pytest.raises(DatasetNotFoundError, match="file-003"):
        ds.read_episode(1)


def test_frame_count_disagreeing_with_metadata_is_corrupt(writable_copy) -> None:
    root = writable_copy("lingzu_teleop_4")
    shard = root / "data" / "chunk-000" / "file-000.parquet"
    table = pq.read_table(shard)
    pq.write_table(table.slice(0, 100), shard)
    with pytest.raises(CorruptDatasetError, match="holds 100 frames of episode 0"):
        open_dataset(root).read_episode(0)


def test_unknown_camera(lingzu: Path) -> None:
    ds = open_dataset(lingzu)
    with pytest.raises(DatasetError, match="camera 'observation.images.top' is not a video feature"):
        ds.video_path("observation.images.top", ds.episodes[0])


def test_repo_id_offline_gives_clear_error(tmp_path: Path, monkeypatch) -> None:
    from steerable.errors import HubError

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    import huggingface_hub.constants as c

    monkeypatch.setattr(c, "HF_HUB_OFFLINE", True)
    with pytest.raises(HubError, match="unreachable|offline|not found"):
        open_dataset("someone/some-dataset", work_dir=tmp_path)
    shutil.rmtree(tmp_path, ignore_errors=True)


def test_repo_id_downloads_a_working_copy_at_the_version_tag(tmp_path: Path, monkeypatch, lingzu: Path) -> None:
    from huggingface_hub.errors import RevisionNotFoundError

    calls: list[dict] = []

    def fake_snapshot_download(repo_id: str, **kw):
        calls.append({"repo_id": repo_id, **kw})
        if kw["revision"] == "v3.0" and repo_id == "someone/untagged":
            import httpx2

            response = httpx2.Response(404, request=httpx2.Request("GET", "https://hub.invalid"))
            raise RevisionNotFoundError("no such revision", response=response)
        shutil.copytree(lingzu, kw["local_dir"], dirs_exist_ok=True)
        return str(kw["local_dir"])

    monkeypatch.setattr("huggingface_hub.snapshot_download", fake_snapshot_download)
    ds = open_dataset("someone/tagged", work_dir=tmp_path)
    assert ds.root == (tmp_path / "someone" / "tagged").resolve()
    assert calls[-1]["revision"] == "v3.0" and calls[-1]["repo_type"] == "dataset"
    assert ds.total_frames == 1700
    ds2 = open_dataset("someone/untagged", work_dir=tmp_path)
    assert [c["revision"] for c in calls[-2:]] == ["v3.0", "main"]
    assert ds2.root.name == "untagged"
