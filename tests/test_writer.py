"""write_language on real LeRobot v3 datasets (and a pandas-written one): what a user reads back."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shared_data import shared_dataset
from steerable.dataset import LeRobotDataset, open_dataset
from steerable.dataset.writer import EpisodeLanguage, write_language
from steerable.errors import DatasetError, LanguageSchemaError
from steerable.language import (
    SAY_TOOL,
    events_column_type,
    language_feature_info,
    language_hf_features,
    persistent_column_type,
    rows_from_arrow,
    sort_events,
    sort_persistent,
    speech_row,
)

LANGUAGE = ["language_persistent", "language_events"]


def copy_fixture(name: str, dest: Path) -> Path:
    source = shared_dataset(name)
    root = dest / name
    # Parquet-only copy: the writer never touches videos.
    shutil.copytree(source, root, ignore=shutil.ignore_patterns("videos"))
    return root


def make_pandas_dataset(root: Path, lengths: list[int], files: list[list[int]], fps: int = 10) -> Path:
    """A v3 dataset written with pandas: plain list<float> features, pandas metadata, legacy subtask_index."""
    (root / "meta" / "episodes" / "chunk-000").mkdir(parents=True)
    feature = {"dtype": "float32", "shape": [3], "names": ["x", "y", "z"]}
    scalar = {"dtype": "int64", "shape": [1], "names": None}
    features = {"observation.state": feature, "action": feature,
                "timestamp": {"dtype": "float32", "shape": [1], "names": None}, "frame_index": scalar,
                "episode_index": scalar, "index": scalar, "task_index": scalar, "subtask_index": scalar}
    info = {"codebase_version": "v3.0", "robot_type": "toy", "total_episodes": len(lengths),
            "total_frames": sum(lengths), "total_tasks": 1, "chunks_size": 1000, "data_files_size_in_mb": 100,
            "video_files_size_in_mb": 200, "fps": fps, "splits": {"train": f"0:{len(lengths)}"},
            "data_path": "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet", "video_path": None,
            "features": features}
    (root / "meta" / "info.json").write_text(json.dumps(info, indent=4))
    pd.DataFrame({"task_index": [0]}, index=pd.Index(["stack the cubes"], name="task")).to_parquet(
        root / "meta" / "tasks.parquet"
    )
    rng = np.random.default_rng(0)
    starts = np.cumsum([0, *lengths])
    episodes = []
    for file_index, members in enumerate(files):
        frames = []
        for ep in members:
            n = lengths[ep]
            frames.append(pd.DataFrame({
                "observation.state": list(rng.normal(size=(n, 3)).astype(np.float32)),
                "action": list(rng.normal(size=(n, 3)).astype(np.float32)),
                "timestamp": (np.arange(n) / fps).astype(np.float32),
                "frame_index": np.arange(n), "episode_index": np.full(n, ep),
                "index": np.arange(starts[ep], starts[ep + 1]), "task_index": np.zeros(n, dtype=np.int64),
                "subtask_index": np.zeros(n, dtype=np.int64),
            }))
            episodes.append({"episode_index": ep, "tasks": ["stack the cubes"], "length": n,
                             "data/chunk_index": 0, "data/file_index": file_index,
                             "dataset_from_index": int(starts[ep]), "dataset_to_index": int(starts[ep + 1]),
                             "meta/episodes/chunk_index": 0, "meta/episodes/file_index": 0})
        path = root / "data" / "chunk-000" / f"file-{file_index:03d}.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        pd.concat(frames, ignore_index=True).to_parquet(path, index=False)
    pd.DataFrame(episodes).to_parquet(root / "meta" / "episodes" / "chunk-000" / "file-000.parquet", index=False)
    return root


def digests(root: Path) -> dict[str, tuple[str, int]]:
    """(sha256, mtime_ns) of every file under root."""
    return {
        str(p.relative_to(root)): (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def annotate(ds: LeRobotDataset, ep: int, tag: str = "") -> EpisodeLanguage:
    """Realistic language for one episode, at frame times given as k / fps (Python floats)."""
    n, fps = ds.episode(ep).length, ds.fps
    k1, k2 = n // 3, 2 * n // 3
    persistent = [
        {"role": "assistant", "content": f"reach{tag}", "style": "subtask", "timestamp": 0.0},
        {"role": "assistant", "content": f"1. reach 2. grasp{tag}", "style": "plan", "timestamp": 0.0},
        {"role": "assistant", "content": f"grasp{tag}", "style": "subtask", "timestamp": k1 / fps},
        {"role": "user", "content": f"pick it up{tag}", "style": "task_aug", "timestamp": 0.0},
    ]
    events: list[tuple[float, dict[str, Any]]] = [
        (k1 / fps, {"role": "user", "content": f"slower please{tag}", "style": "interjection"}),
        (k1 / fps, speech_row(f"Slowing down.{tag}")),
    ]
    for camera in ds.info.camera_keys:
        events.append((k2 / fps, {"role": "user", "content": "How many cubes?", "style": "vqa", "camera": camera}))
        events.append((k2 / fps, {"role": "assistant", "content": '{"count": 1}', "style": "vqa",
                                  "camera": camera}))
    return EpisodeLanguage(persistent, events)


def expected_cells(ds: LeRobotDataset, ep: int, lang: EpisodeLanguage) -> tuple[list, list]:
    """What every frame of `ep` must read back as, computed independently of the writer."""
    stored = ds.episode_timestamps(ep)
    full = [{"role": None, "content": None, "style": None, "timestamp": None, "camera": None, "tool_calls": None,
             **r} for r in lang.persistent]
    for row in full:
        row["timestamp"] = float(np.float32(row["timestamp"]))
    persistent = sort_persistent(full)
    events: list[list[dict]] = [[] for _ in stored]
    for t, row in lang.events:
        (hits,) = np.nonzero(stored == np.float32(t))
        events[int(hits[0])].append({"role": None, "content": None, "style": None, "camera": None,
                                     "tool_calls": None, **row})
    return [persistent] * len(stored), [sort_events(cells) for cells in events]


def language_of(ds: LeRobotDataset, ep: int) -> tuple[list, list]:
    table = ds.read_episode(ep, LANGUAGE)
    return rows_from_arrow(table.column(LANGUAGE[0])), rows_from_arrow(table.column(LANGUAGE[1]))


def assert_one_row_group_per_episode(path: Path) -> None:
    meta = pq.ParquetFile(path).metadata
    column = meta.schema.to_arrow_schema().names.index("episode_index")
    ranges = [(meta.row_group(i).column(column).statistics.min, meta.row_group(i).column(column).statistics.max)
              for i in range(meta.num_row_groups)]
    assert all(lo == hi for lo, hi in ranges), ranges
    assert len({lo for lo, _ in ranges}) == len(ranges), "each episode in exactly one row group"


def test_so101_episodes_written_and_read_back(tmp_path: Path) -> None:
    root = copy_fixture("so101_record_test", tmp_path)
    shard = root / "data" / "chunk-000" / "file-000.parquet"
    before = pq.read_table(shard)
    info_before = json.loads((root / "meta" / "info.json").read_text())
    ds = open_dataset(root)
    updates = {1: annotate(ds, 1), 3: annotate(ds, 3)}
    report = write_language(ds, updates)

    assert report.shards == (shard,)
    assert report.episodes == (1, 3)
    assert report.rows == sum(len(u.persistent) + len(u.events) for u in updates.values())
    assert report.frames == before.num_rows
    ds = open_dataset(root)
    for ep in (1, 3):
        assert language_of(ds, ep) == expected_cells(ds, ep, updates[ep])
    for ep in (0, 2):
        persistent, events = language_of(ds, ep)
        assert persistent == [[]] * ds.episode(ep).length and events == [[]] * ds.episode(ep).length

    after = pq.read_table(shard)
    assert after.column_names == before.column_names + LANGUAGE
    assert after.select(before.column_names).equals(before), "every other column equal, in content and type"
    assert after.schema.field(LANGUAGE[0]).type == persistent_column_type()
    assert after.schema.field(LANGUAGE[1]).type == events_column_type()
    assert_one_row_group_per_episode(shard)
    hf_before = json.loads(before.schema.metadata[b"huggingface"])
    hf_after = json.loads(after.schema.metadata[b"huggingface"])
    assert hf_after["info"]["features"] == {**hf_before["info"]["features"], **language_hf_features()}
    assert hf_after["fingerprint"] == hf_before["fingerprint"]

    info = json.loads((root / "meta" / "info.json").read_text())
    assert info["features"] == {**info_before["features"], **language_feature_info()}
    assert info["tools"] == [SAY_TOOL]
    assert {k: v for k, v in info.items() if k not in ("features", "tools")} == {
        k: v for k, v in info_before.items() if k != "features"
    }
    assert ds.has_language


def test_lingzu_untouched_shards_are_not_rewritten(tmp_path: Path) -> None:
    root = copy_fixture("lingzu_teleop_4", tmp_path)
    ds = open_dataset(root)
    originals = {p: pq.read_table(p) for p in ds.data_files()}
    # First write: every shard gains the (empty) language columns that info.json now declares.
    first = write_language(ds, {0: annotate(ds, 0)})
    assert set(first.shards) == set(originals)
    for path, original in originals.items():
        table = pq.read_table(path)
        assert table.select(original.column_names).equals(original)
        hf_before = json.loads(original.schema.metadata[b"huggingface"])["info"]["features"]
        hf_after = json.loads(table.schema.metadata[b"huggingface"])["info"]["features"]
        assert hf_after == {**hf_before, **language_hf_features()}
        assert_one_row_group_per_episode(path)
    assert language_of(ds, 0) == expected_cells(ds, 0, annotate(ds, 0))
    assert language_of(ds, 2)[0] == [[]] * ds.episode(2).length

    state = digests(root)
    second = write_language(ds, {2: annotate(ds, 2)})
    target = ds.data_path(ds.episode(2))
    assert second.shards == (target,)
    changed = {name for name, d in digests(root).items() if state.get(name) != d}
    assert changed == {str(target.relative_to(root)), "meta/info.json"}
    assert language_of(ds, 0) == expected_cells(ds, 0, annotate(ds, 0)), "episode 0 kept its rows"
    assert language_of(ds, 2) == expected_cells(ds, 2, annotate(ds, 2))


def test_untouched_episodes_in_a_rewritten_shard_keep_their_rows(tmp_path: Path) -> None:
    root = copy_fixture("so101_record_test", tmp_path)
    ds = open_dataset(root)
    write_language(ds, {0: annotate(ds, 0), 1: annotate(ds, 1)})
    write_language(ds, {1: annotate(ds, 1, tag=" v2")})
    assert language_of(ds, 0) == expected_cells(ds, 0, annotate(ds, 0))
    assert language_of(ds, 1) == expected_cells(ds, 1, annotate(ds, 1, tag=" v2"))
    write_language(ds, {1: EpisodeLanguage()})
    assert language_of(ds, 1) == ([[]] * ds.episode(1).length, [[]] * ds.episode(1).length), "[] clears"


def test_pandas_written_dataset(tmp_path: Path) -> None:
    root = make_pandas_dataset(tmp_path / "pandas_ds", lengths=[20, 15, 12], files=[[0, 1], [2]])
    shards = sorted((root / "data").rglob("*.parquet"))
    before = {p: pq.read_table(p) for p in shards}
    ds = open_dataset(root)
    write_language(ds, {0: annotate(ds, 0), 2: annotate(ds, 2)})
    for path, original in before.items():
        table = pq.read_table(path)
        kept = [c for c in original.column_names if c != "subtask_index"]
        assert table.column_names == kept + LANGUAGE, "legacy subtask_index dropped, language appended"
        assert table.select(kept).equals(original.select(kept))
        assert table.schema.field("observation.state").type == pa.list_(pa.float32())
        pandas_meta = json.loads(table.schema.metadata[b"pandas"])
        assert "subtask_index" not in [c["name"] for c in pandas_meta["columns"]]
        frame = table.to_pandas()
        assert list(frame.columns) == kept + LANGUAGE
        assert_one_row_group_per_episode(path)
    info = json.loads((root / "meta" / "info.json").read_text())
    assert "subtask_index" not in info["features"], "no shard has it any more"
    ds = open_dataset(root)
    for ep in (0, 2):
        assert language_of(ds, ep) == expected_cells(ds, ep, annotate(ds, ep))
    assert language_of(ds, 1)[1] == [[]] * 15


def test_rows_written_by_lerobot_are_kept_and_made_canonical(tmp_path: Path) -> None:
    root = make_pandas_dataset(tmp_path / "ds", lengths=[6, 5], files=[[0, 1]])
    shard = root / "data" / "chunk-000" / "file-000.parquet"
    table = pq.read_table(shard)
    # What LeRobot's annotation writer stores: pyarrow-inferred structs, float64 timestamps.
    subtask = {"role": "assistant", "content": "wipe", "style": "subtask", "timestamp": 0.0, "camera": None,
               "tool_calls": None}
    say = speech_row("Wiping.")
    persistent = [[subtask]] * 6 + [[]] * 5
    events = [[say]] + [[]] * 10
    table = table.append_column(LANGUAGE[0], pa.array(persistent)).append_column(LANGUAGE[1], pa.array(events))
    pq.write_table(table, shard)
    ds = open_dataset(root)
    write_language(ds, {1: EpisodeLanguage([{**subtask, "content": "dry"}], [])})
    after = pq.read_table(shard)
    assert after.schema.field(LANGUAGE[0]).type == persistent_column_type()
    assert rows_from_arrow(after.column(LANGUAGE[0]))[:6] == [[subtask]] * 6
    assert rows_from_arrow(after.column(LANGUAGE[1]))[:6] == [[say]] + [[]] * 5
    assert rows_from_arrow(after.column(LANGUAGE[0]))[6][0]["content"] == "dry"


def test_same_updates_twice_give_byte_identical_files(tmp_path: Path) -> None:
    root = copy_fixture("lingzu_teleop_4", tmp_path)
    ds = open_dataset(root)
    updates = {1: annotate(ds, 1), 3: annotate(ds, 3)}
    write_language(ds, updates)
    once = {name: digest for name, (digest, _) in digests(root).items()}
    write_language(open_dataset(root), updates)
    assert {name: digest for name, (digest, _) in digests(root).items()} == once


def test_event_time_between_frames_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    root = copy_fixture("so101_record_test", tmp_path)
    ds = open_dataset(root)
    state = digests(root)
    bad = annotate(ds, 2)
    bad.events.append((0.5 / ds.fps, speech_row("between two frames")))
    with pytest.raises(LanguageSchemaError) as info:
        write_language(ds, {0: annotate(ds, 0), 2: bad})
    first_line = str(info.value).splitlines()[0]
    assert "episode 2" in first_line and "t=0.016666668" in first_line
    assert digests(root) == state, "nothing written, not even the valid episode 0"


def test_every_bad_episode_is_reported_before_anything_is_written(tmp_path: Path) -> None:
    root = copy_fixture("so101_record_test", tmp_path)
    ds = open_dataset(root)
    state = digests(root)
    bad_style = EpisodeLanguage([{"role": "assistant", "content": "x", "style": "surprise", "timestamp": 0.0}])
    bad_camera = EpisodeLanguage([], [(0.0, {"role": "user", "content": "?", "style": "vqa",
                                            "camera": "observation.images.side"})])
    with pytest.raises(LanguageSchemaError) as info:
        write_language(ds, {1: bad_style, 3: bad_camera})
    text = str(info.value)
    assert "episode 1 persistent[0]: unknown style 'surprise'" in text
    assert "episode 3 events[t=0.0][0]: camera 'observation.images.side'" in text
    assert digests(root) == state


def test_unknown_episode_is_refused(tmp_path: Path) -> None:
    root = copy_fixture("so101_record_test", tmp_path)
    ds = open_dataset(root)
    state = digests(root)
    with pytest.raises(DatasetError, match="episode 9"):
        write_language(ds, {9: EpisodeLanguage()})
    assert digests(root) == state


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(picks=st.lists(st.tuples(st.integers(0, 16), st.sampled_from(["a", "b", "c"])), max_size=8))
def test_each_event_lands_on_the_frame_of_its_time(tmp_path: Path, picks: list[tuple[int, str]]) -> None:
    root = tmp_path / "bucket"
    if not root.exists():
        make_pandas_dataset(root, lengths=[17, 5], files=[[0, 1]], fps=15)
    ds = open_dataset(root)
    events = [(k / 15, {"role": "user", "content": text, "style": "interjection"}) for k, text in picks]
    write_language(ds, {0: EpisodeLanguage([], events)})
    _, cells = language_of(ds, 0)
    for k in range(17):
        # Same style and role: the sort is stable, so rows keep the order they were given in.
        assert [row["content"] for row in cells[k]] == [text for pick, text in picks if pick == k]
