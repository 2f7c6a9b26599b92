"""`steerable view DATASET --rerun FILE.rrd`: the .rrd read back with Rerun's dataframe API.

The language entities must hold the dataset's rows at their frames, the VQA box must sit on the
dataset's pixels, the video must be the dataset's mp4 (frames referenced, not re-encoded), and the
state/action plots must be the parquet's values under their names.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import av
import numpy as np
import pytest
import rerun as rr  # the [rerun] extra, in the test extra with [catalog] (datafusion) for the read-back

from process_helpers import free_port
from steerable.dataset import LeRobotDataset
from steerable.language.rows import rows_from_arrow
from steerable.language.styles import LANGUAGE_PERSISTENT
from viewer_data import (
    SAY_FRAME,
    TOP,
    TOP_BOX,
    VQA_FRAME,
    WRIST,
    WRIST_POINT,
    steerable,
)


@pytest.fixture(scope="module")
def rrd(viewer_ds: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("rerun") / "episodes.rrd"
    done = steerable("view", str(viewer_ds), "--rerun", str(out), "--episodes", "0,2")
    assert done.returncode == 0, done.stderr
    assert "episode 0:" in done.stdout and "episode 2:" in done.stdout, done.stdout
    assert "remuxed clip" in done.stdout, done.stdout  # the synthetic mp4s hold 3 GOP-aligned episodes
    return out


def store(path: Path, episode: int) -> Any:
    reader = rr.chunk.RrdReader(path)
    entry = next(e for e in reader.recordings() if e.recording_id == f"episode_{episode:06d}")
    return reader.store(store=entry).stream().collect()


def frame_table(st: Any, contents: str) -> list[dict[str, Any]]:
    """Rows of the dataframe on the frame_index timeline, with only the non-null cells."""
    table = st.reader(index="frame_index", contents=contents).to_arrow_table()
    return [{k: v for k, v in row.items() if v is not None} for row in table.to_pylist()]


def static_cell(st: Any, column: str) -> Any:
    table = st.reader(index=None).to_arrow_table()
    return table.column(column)[0].as_py()


def test_two_episodes_are_two_recordings_with_a_blueprint(rrd: Path) -> None:
    reader = rr.chunk.RrdReader(rrd)
    assert sorted(e.recording_id for e in reader.recordings()) == ["episode_000000", "episode_000002"]
    assert len(reader.blueprints()) == 2


def test_persistent_rows_hold_at_their_frames(rrd: Path, viewer_ds: Path) -> None:
    ds = LeRobotDataset(viewer_ds)
    table = ds.read_episode(0, ["timestamp", LANGUAGE_PERSISTENT])
    stamps = table.column("timestamp").to_numpy()
    persistent = rows_from_arrow(table.column(LANGUAGE_PERSISTENT).slice(0, 1))[0]
    rows = frame_table(store(rrd, 0), "/language/**")
    for style in ("subtask", "motion"):
        want = sorted(
            (int(np.flatnonzero(stamps == np.float32(r["timestamp"]))[0]), r["content"])
            for r in persistent if r["style"] == style
        )
        assert want, style
        got = sorted(
            (row["frame_index"], row[f"/language/{style}:TextDocument:text"][0])
            for row in rows if f"/language/{style}:TextDocument:text" in row
        )
        assert got == want, style
        lanes = [(row["frame_index"], row[f"/language/{style}:StateChange:state"][0])
                 for row in rows if f"/language/{style}:StateChange:state" in row]
        assert sorted(lanes) == want
        # the dataframe's `time` is the row's stored timestamp
        for row in rows:
            if f"/language/{style}:TextDocument:text" in row:
                assert abs(row["time"].total_seconds() - float(stamps[row["frame_index"]])) < 1e-6
    task = static_cell(store(rrd, 0), "/language/task:TextDocument:text")
    assert task == [ds.task_of(ds.episode(0))]


def test_value_holds_until_the_next_row(rrd: Path) -> None:
    st = store(rrd, 0)
    logged = [r for r in frame_table(st, "/language/subtask") if "/language/subtask:TextDocument:text" in r]
    first, second = logged[0], logged[1]
    probe = (first["frame_index"] + second["frame_index"]) // 2
    table = st.reader(index="frame_index", contents="/language/subtask", fill_latest_at=True,
                      using_index_values=np.array([probe], dtype=np.int64)).to_arrow_table()
    assert table.column("/language/subtask:TextDocument:text")[0].as_py() == first[
        "/language/subtask:TextDocument:text"]


def test_events_are_text_logs_at_their_frame(rrd: Path) -> None:
    rows = frame_table(store(rrd, 2), "/language/**")
    by_entity: dict[str, list[tuple[int, str]]] = {}
    for row in rows:
        for key, value in row.items():
            if key.endswith(":TextLog:text"):
                by_entity.setdefault(key.split(":")[0], []).append((row["frame_index"], value[0]))
    assert by_entity["/language/interjection"] == [(SAY_FRAME, "use the other bin instead")]
    assert by_entity["/language/speech"] == [(SAY_FRAME, "Okay, switching to the other bin.")]
    (frame, text), = by_entity["/language/vqa/top"]
    assert frame == VQA_FRAME and text.startswith("Q: where is the cube?\nA: ")
    assert json.loads(text.split("A: ", 1)[1])["detections"][0]["bbox"] == TOP_BOX
    assert by_entity["/language/vqa/wrist"][0][0] == VQA_FRAME


def _xyxy(row: dict[str, Any], entity: str) -> list[list[float]]:
    centers = np.asarray(row[f"{entity}:Boxes2D:centers"])
    half = np.asarray(row[f"{entity}:Boxes2D:half_sizes"])
    return np.concatenate([centers - half, centers + half], axis=1).tolist()


def _decode_at(mp4: bytes, tmp: Path, nanos: int) -> np.ndarray:
    tmp.write_bytes(mp4)
    with av.open(str(tmp)) as container:
        stream = container.streams.video[0]
        for frame in container.decode(stream):
            assert frame.pts is not None and stream.time_base is not None
            if abs(float(frame.pts * stream.time_base) * 1e9 - nanos) < 1e3:
                return frame.to_ndarray(format="rgb24")
    raise AssertionError(f"no frame at {nanos} ns")


def test_vqa_box_and_point_sit_on_the_datasets_pixels(rrd: Path, viewer_ds: Path, tmp_path: Path) -> None:
    ds = LeRobotDataset(viewer_ds)
    st = store(rrd, 0)
    rows = {r["frame_index"]: r for r in frame_table(st, "/language/vqa/**")}
    box_entity = "/language/vqa/top/boxes"
    assert _xyxy(rows[VQA_FRAME], box_entity) == [[float(v) for v in TOP_BOX]]
    assert rows[VQA_FRAME][f"{box_entity}:Boxes2D:labels"] == ["cube · where is the cube?"]
    assert rows[VQA_FRAME]["/language/vqa/wrist/points:Points2D:positions"] == [[float(v) for v in WRIST_POINT]]
    # cleared 1 s (15 frames) later
    assert rows[VQA_FRAME + ds.fps][f"{box_entity}:Boxes2D:centers"] == []
    # The box's pixels in the recording's video are the dataset's pixels of that camera and frame.
    refs = frame_table(st, "/cameras/top")
    nanos = next(r for r in refs if r["frame_index"] == VQA_FRAME)["/cameras/top:VideoFrameReference:timestamp"][0]
    blob = static_cell(st, "/cameras/top:AssetVideo:blob")
    logged = _decode_at(bytes(blob[0]), tmp_path / "top.mp4", nanos)
    stamp = float(ds.episode_timestamps(0)[VQA_FRAME])
    (truth,) = ds.decode_frames(0, TOP, [stamp])
    x0, y0, x1, y1 = TOP_BOX
    assert logged.shape == truth.shape
    np.testing.assert_array_equal(logged[y0:y1, x0:x1], truth[y0:y1, x0:x1])


def test_video_is_the_episodes_mp4_referenced_per_frame(rrd: Path, viewer_ds: Path) -> None:
    ds = LeRobotDataset(viewer_ds)
    ep = ds.episode(2)
    st = store(rrd, 2)
    for camera in (TOP, WRIST):
        name = camera.rsplit(".", 1)[1]
        refs = frame_table(st, f"/cameras/{name}")
        nanos = [r[f"/cameras/{name}:VideoFrameReference:timestamp"][0] for r in refs]
        assert [r["frame_index"] for r in refs] == list(range(ep.length))
        assert nanos == sorted(set(nanos))  # one distinct frame per dataset frame
        media = static_cell(st, f"/cameras/{name}:AssetVideo:media_type")
        assert media == ["video/mp4"]


def test_state_and_action_are_named_scalars(rrd: Path, viewer_ds: Path) -> None:
    ds = LeRobotDataset(viewer_ds)
    st = store(rrd, 0)
    for key in ("observation.state", "action"):
        truth = np.asarray(ds.read_episode(0, [key]).column(key).to_pylist(), dtype=np.float64)
        rows = frame_table(st, f"/plots/{key}")
        values = np.asarray([r[f"/plots/{key}:Scalars:scalars"] for r in rows])
        np.testing.assert_allclose(values, truth)
        names = static_cell(st, f"/plots/{key}:SeriesLines:names")
        assert names == ds.features[key]["names"]


def test_bad_rerun_targets_are_one_line_exit_2(viewer_ds: Path, tmp_path: Path) -> None:
    for value in ("out.txt", str(tmp_path / "no" / "such" / "dir" / "x.rrd")):
        done = steerable("view", str(viewer_ds), "--rerun", value)
        assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    done = steerable("view", str(viewer_ds), "--rerun", str(tmp_path / "x.rrd"), "--episodes", "99")
    assert done.returncode == 2 and "episode 99" in done.stderr
    assert not (tmp_path / "x.rrd").exists()


def test_spawning_without_a_display_is_one_line(viewer_ds: Path, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    from steerable.cli.main import main

    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    started = time.monotonic()
    assert main(["view", str(viewer_ds), "--rerun"]) == 2
    err = capsys.readouterr().err
    assert "needs a display" in err and "--rerun FILE.rrd" in err and len(err.strip().splitlines()) == 1, err
    assert time.monotonic() - started < 10  # not the SDK's connection retries


def test_without_rerun_sdk_the_flag_names_the_extra(viewer_ds: Path, tmp_path: Path) -> None:
    blocked = tmp_path / "blocked" / "rerun"
    blocked.mkdir(parents=True)
    (blocked / "__init__.py").write_text("raise ImportError('rerun-sdk is not installed here')\n")
    env = {**os.environ, "PYTHONPATH": f"{blocked.parent}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    done = subprocess.run(
        [sys.executable, "-m", "steerable.cli.main", "view", str(viewer_ds), "--rerun", str(tmp_path / "x.rrd")],
        capture_output=True, text=True, env=env, timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert "steerable[rerun]" in done.stderr and len(done.stderr.strip().splitlines()) == 1


@pytest.mark.filterwarnings("ignore:RRD file has no footer")  # a streamed file has no manifest
def test_url_streams_to_a_running_viewer(viewer_ds: Path, tmp_path: Path) -> None:
    """`--rerun rerun+http://...`: the SDK's own `rerun --save` server receives both recordings."""
    from steerable.viewer.rerun.sinks import rerun_executable

    port = free_port()
    got = tmp_path / "got.rrd"
    server = subprocess.Popen([rerun_executable(), "--port", str(port), "--save", str(got)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):  # wait until it listens
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        done = steerable("view", str(viewer_ds), "--rerun", f"rerun+http://127.0.0.1:{port}/proxy", "--episodes", "0,1")
        assert done.returncode == 0, done.stderr
        assert f"sent to the Rerun viewer at rerun+http://127.0.0.1:{port}/proxy" in done.stdout
    finally:
        server.send_signal(2)  # Ctrl-C: the server finishes the file
        server.wait(timeout=30)
    reader = rr.chunk.RrdReader(got)
    assert sorted(e.recording_id for e in reader.recordings()) == ["episode_000000", "episode_000001"]
    entry = next(e for e in reader.recordings() if e.recording_id == "episode_000001")
    rows = frame_table(reader.stream(store=entry).collect(), "/language/speech")
    assert [(r["frame_index"], r["/language/speech:TextLog:text"]) for r in rows] == [
        (SAY_FRAME, ["Okay, switching to the other bin."])
    ]


def test_unreachable_viewer_is_one_line_exit_2(viewer_ds: Path) -> None:
    port = free_port()
    done = steerable("view", str(viewer_ds), "--rerun", f"rerun+http://127.0.0.1:{port}/proxy")
    assert done.returncode == 2 and "no Rerun viewer answers" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
