"""`steerable view --export` / `export_site`: a static site with per-episode clips and script data."""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

import av
import numpy as np
import pytest

from steerable.dataset import LeRobotDataset
from steerable.errors import ConfigError
from steerable.recipes import load_recipe
from steerable.train.samples import DatasetRenderer
from steerable.viewer import export_site
from steerable.viewer.clips import cut_clip, remux_clip
from viewer_data import TOP, WRIST, steerable


@pytest.fixture(scope="module")
def exported(viewer_ds: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return export_site(viewer_ds, tmp_path_factory.mktemp("export") / "site", episodes=[0, 2])


def load_script(path: Path, prefix: str) -> dict:
    text = path.read_text(encoding="utf-8")
    assert text.startswith(prefix + " = ") and text.rstrip().endswith(";")
    return json.loads(text[len(prefix) + 3 :].rstrip().rstrip(";"))


def test_site_layout(exported: Path) -> None:
    site = exported.parent
    assert exported.name == "index.html"
    page = exported.read_text()
    # the data script runs as it is parsed; the app's scripts are deferred, so they run after it
    assert '<script src="data/dataset.js"></script>' in page and '<script src="assets/app.js" defer></script>' in page
    assert "https://" not in page and "type=\"module\"" not in page  # classic scripts: they load from file://
    data = load_script(site / "data" / "dataset.js", "window.STEERABLE_EXPORT")
    assert [e["episode_index"] for e in data["dataset"]["episodes"]] == [0, 2]
    assert sorted(p.name for p in (site / "data").iterdir()) == ["dataset.js", "episode_000000.js", "episode_000002.js"]
    assert (site / "assets" / "app.js").is_file() and (site / "assets" / "style.css").is_file()


def test_clips_hold_exactly_the_episode(exported: Path, viewer_ds: Path) -> None:
    site = exported.parent
    ds = LeRobotDataset(viewer_ds)
    ep = load_script(site / "data" / "episode_000002.js", "window.STEERABLE_EXPORT.episodes[2]")
    cameras = {c["key"]: c for c in ep["cameras"]}
    assert set(cameras) == {TOP, WRIST}
    for key, cam in cameras.items():
        assert cam["offset"] == 0.0 and cam["url"] == f"videos/{key}/episode_000002.mp4"
        with av.open(str(site / cam["url"])) as c:
            stream = c.streams.video[0]
            assert stream.codec_context.name == "h264"
            frames = [f.to_ndarray(format="rgb24") for f in c.decode(stream)]
        assert len(frames) == ds.episode(2).length
        # remuxed (episodes start on keyframes): clip frame k is the episode's frame k, bit for bit
        stamps = ds.episode_timestamps(2)
        for k in (0, 37, len(frames) - 1):
            (orig,) = ds.decode_frames(2, key, [float(stamps[k])])
            assert np.array_equal(frames[k], orig)


def test_clip_not_on_a_keyframe_is_reencoded(viewer_ds: Path, tmp_path: Path) -> None:
    ds = LeRobotDataset(viewer_ds)
    ep = ds.episode(1)
    span = ep.videos[TOP]
    start, end = span.from_timestamp + 5 / ds.fps, span.from_timestamp + 45 / ds.fps  # mid-GOP
    src = ds.video_path(TOP, ep)
    assert remux_clip(src, tmp_path / "remux.mp4", start, end, ds.fps) is None
    assert not (tmp_path / "remux.mp4").exists()
    assert cut_clip(src, tmp_path / "clip.mp4", start, end, ds.fps) == 40
    with av.open(str(tmp_path / "clip.mp4")) as c:
        frames = [f.to_ndarray(format="rgb24").astype(int) for f in c.decode(video=0)]
    assert len(frames) == 40
    stamps = ds.episode_timestamps(1)
    (orig,) = ds.decode_frames(1, TOP, [float(stamps[5])])
    assert np.abs(frames[0] - orig).mean() < 6  # re-encoded: close, not identical
    assert np.abs(frames[0] - orig).mean() < np.abs(frames[20] - orig).mean()


def test_recipe_samples_match_the_renderer(exported: Path, viewer_ds: Path) -> None:
    ep = load_script(exported.parent / "data" / "episode_000000.js", "window.STEERABLE_EXPORT.episodes[0]")
    ds = LeRobotDataset(viewer_ds)
    renderer = DatasetRenderer(ds, load_recipe("subtask_mem"))
    stored = ep["renders"]["subtask_mem"]
    assert len(stored["frames"]) == ds.episode(0).length
    for s in renderer.episode_samples(0):
        got = stored["samples"][stored["frames"][s.frame_index]]
        assert got["messages"] == (s.sample.messages if s.sample else None)
    assert len(stored["samples"]) < len(stored["frames"])  # deduplicated


def test_refuses_unrelated_or_inner_folders(viewer_ds: Path, tmp_path: Path) -> None:
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("keep me")
    with pytest.raises(ConfigError, match="not empty"):
        export_site(viewer_ds, busy)
    with pytest.raises(ConfigError, match="inside the dataset"):
        export_site(viewer_ds, viewer_ds / "site")
    assert (busy / "notes.txt").read_text() == "keep me"


def test_cli_export_and_reexport(viewer_ds: Path, tmp_path: Path) -> None:
    out = tmp_path / "site"
    for _ in range(2):  # a second export over the first one replaces it
        done = steerable("view", str(viewer_ds), "--export", str(out), "--episodes", "1")
        assert done.returncode == 0, done.stderr
        assert str(out / "index.html") in done.stdout
    assert (out / "videos" / TOP / "episode_000001.mp4").is_file()


def test_missing_videos_leave_a_note_not_a_failure(so101: Path, tmp_path: Path) -> None:
    index = export_site(so101, tmp_path / "site", episodes=[0])
    ep = load_script(index.parent / "data" / "episode_000000.js", "window.STEERABLE_EXPORT.episodes[0]")
    assert [c["url"] for c in ep["cameras"]] == [None, None]
    assert all("missing" in c["error"] for c in ep["cameras"])
    assert ep["plot"]["series"][0]["key"] == "observation.state" and ep["length"] > 0
    assert not (index.parent / "videos").exists()


def top_level_boxes(path: Path) -> list[str]:
    """The mp4's top-level box types, in file order."""
    data, boxes, at = path.read_bytes(), [], 0
    while at + 8 <= len(data):
        size, kind = struct.unpack(">I4s", data[at : at + 8])
        boxes.append(kind.decode("latin-1"))
        if size == 1:
            size = struct.unpack(">Q", data[at + 8 : at + 16])[0]
        at += size if size else len(data)
    return boxes


def test_mpeg4_episodes_export_as_clips_a_browser_streams(lingzu: Path, tmp_path: Path) -> None:
    index = export_site(lingzu, tmp_path / "site", episodes=[2, 3], recipes=["subtask_mem"])
    ds = LeRobotDataset(lingzu)
    for n in (2, 3):
        clip = index.parent / "videos" / "image" / f"episode_{n:06d}.mp4"
        with av.open(str(clip)) as c:
            stream = c.streams.video[0]
            assert stream.codec_context.name == "h264" and stream.codec_context.format.name == "yuv420p"
            assert stream.codec_context.profile in ("Baseline", "Constrained Baseline", "Main")
            frames = [f.to_ndarray(format="rgb24").astype(int) for f in c.decode(stream)]
        assert len(frames) == ds.episode(n).length
        boxes = top_level_boxes(clip)
        assert boxes.index("moov") < boxes.index("mdat")  # faststart: playable before the whole file is read
        stamps = ds.episode_timestamps(n)
        for k in (0, len(frames) // 2, len(frames) - 1):
            (orig,) = ds.decode_frames(n, "image", [float(stamps[k])])
            assert np.abs(frames[k] - orig).mean() < 4  # re-encoded: close to the dataset's frame k


def test_export_of_a_reversed_range_is_refused(viewer_ds: Path, tmp_path: Path) -> None:
    done = steerable("view", str(viewer_ds), "--export", str(tmp_path / "site"), "--episodes", "2-1")
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "--episodes" in done.stderr and "2-1" in done.stderr
    assert not (tmp_path / "site").exists()


def test_export_reports_progress_in_a_pipe(viewer_ds: Path, tmp_path: Path) -> None:
    done = steerable("view", str(viewer_ds), "--export", str(tmp_path / "site"), "--episodes", "0,2")
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("view --export:")]
    assert lines and "episodes 2/2" in lines[-1] and "ETA" in lines[-1], done.stderr


def test_export_shows_a_live_line_on_a_terminal(viewer_ds: Path, tmp_path: Path) -> None:
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "steerable.cli.main", "view", str(viewer_ds), "--export", str(tmp_path / "site")],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=follower,
        env={**os.environ, "COLUMNS": "160"},
    )
    os.close(follower)
    seen = b""
    while True:
        ready, _, _ = select.select([leader], [], [], 60)
        try:
            chunk = os.read(leader, 4096) if ready else b""
        except OSError:  # the child closed the terminal
            chunk = b""
        if not chunk:
            break
        seen += chunk
    os.close(leader)
    assert proc.wait(timeout=60) == 0, seen
    text = seen.decode(errors="replace")
    assert "view --export: episodes 3/3" in text and "ETA" in text


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_stopping_an_export_leaves_nothing_behind(lingzu: Path, tmp_path: Path, sig: signal.Signals) -> None:
    parent = tmp_path / "out"
    parent.mkdir()
    # Each episode's page takes half a second more in the child, so the signal lands mid-export however
    # loaded the machine is (the whole export of these four episodes took 3 s: under load it once ended first).
    slow = tmp_path / "slow"
    slow.mkdir()
    (slow / "sitecustomize.py").write_text(
        "import time\nimport steerable.viewer.export as export\nwrite = export._script\n"
        "def _slow(*args, **kwargs):\n    time.sleep(0.5)\n    return write(*args, **kwargs)\n"
        "export._script = _slow\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "steerable.cli.main", "view", str(lingzu), "--export", str(parent / "site")],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(slow), os.environ.get("PYTHONPATH")]))},
    )
    deadline = time.monotonic() + 60
    while not any("-new-" in p.name for p in parent.iterdir()) and time.monotonic() < deadline:
        time.sleep(0.01)  # the export is building its new version: stop it now
    assert proc.poll() is None, "the export ended before it could be stopped"
    proc.send_signal(sig)
    started = time.monotonic()
    _, err = proc.communicate(timeout=30)
    assert time.monotonic() - started < 10, "the encoders did not stop"
    assert proc.returncode == 128 + sig, err  # 130 for Ctrl-C, 143 for SIGTERM
    assert "Traceback" not in err
    assert list(parent.iterdir()) == []  # no half-built site, no lock, no staging folder
