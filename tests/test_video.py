"""Video decoding and encoding through PyAV: right frame at each time, clear errors, atomic mp4 writes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import av
import numpy as np
import pytest

from shared_data import shared_path
from steerable.dataset.video import VideoWriter, available_codecs, decode_frames, probe_video
from steerable.errors import ConfigError, VideoError, VideoNotFoundError, WriteError

FPS = 30
W, H = 128, 96
BLOCK = 32  # a 4 x 3 grid of 32-pixel blocks carries a 12-bit frame number
LINGZU_VIDEO = ("lingzu_teleop_4", "videos", "image", "chunk-000", "file-000.mp4")
HAS_AV1 = bool(available_codecs()["av1"].encoders and available_codecs()["av1"].decoders)
NO_AV1 = "this PyAV build has no AV1 encoder (libsvtav1/libaom-av1) or decoder (libdav1d/libaom-av1)"

# (codec, keyframe interval): a 2-frame GOP is what LeRobot writes; 10 makes GOPs worth skipping.
CASES = [
    pytest.param("h264", 10, id="h264-gop10"),
    pytest.param("h264", 2, id="h264-gop2"),
    pytest.param("av1", 10, id="av1-gop10", marks=pytest.mark.skipif(not HAS_AV1, reason=NO_AV1)),
]


def pattern(number: int) -> np.ndarray:
    """A frame whose big yellow (bit 1) / blue (bit 0) blocks spell `number`; survives lossy coding."""
    img = np.zeros((H, W, 3), np.uint8)
    for bit in range(12):
        row, col = divmod(bit, W // BLOCK)
        colour = (255, 220, 0) if number >> bit & 1 else (0, 40, 255)
        img[row * BLOCK : (row + 1) * BLOCK, col * BLOCK : (col + 1) * BLOCK] = colour
    return img


def number_in(img: np.ndarray) -> int:
    """Read back the frame number that `pattern` drew, from the centre of each block."""
    assert img.shape == (H, W, 3) and img.dtype == np.uint8
    number = 0
    for bit in range(12):
        row, col = divmod(bit, W // BLOCK)
        centre = img[row * BLOCK + 8 : (row + 1) * BLOCK - 8, col * BLOCK + 8 : (col + 1) * BLOCK - 8, 0]
        number |= int(centre.mean() > 128) << bit
    return number


def write_video(path: Path, numbers: range, codec: str = "h264", gop: int | None = 10) -> Path:
    with VideoWriter(path, FPS, W, H, codec=codec, gop=gop) as writer:
        for n in numbers:
            writer.write(pattern(n))
    return path


@pytest.fixture(scope="module")
def videos(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, int], Path]:
    """45 frames (1.5 s) per case, written once for the whole module."""
    root = tmp_path_factory.mktemp("videos")
    made = {}
    for codec, gop in (("h264", 10), ("h264", 2)) + ((("av1", 10),) if HAS_AV1 else ()):
        made[codec, gop] = write_video(root / f"{codec}-{gop}.mp4", range(45), codec, gop)
    return made


# -- decoding -------------------------------------------------------------------------------------


@pytest.mark.parametrize(("codec", "gop"), CASES)
def test_each_exact_timestamp_gives_its_own_frame(videos: dict, codec: str, gop: int) -> None:
    frames = decode_frames(videos[codec, gop], [i / FPS for i in range(45)])
    assert [number_in(f) for f in frames] == list(range(45))


@pytest.mark.parametrize(("codec", "gop"), CASES)
def test_every_frame_requested_alone_is_found_after_a_seek(videos: dict, codec: str, gop: int) -> None:
    # includes the frames just before each keyframe, which B-frame reordering puts after it on disk
    assert [number_in(decode_frames(videos[codec, gop], [i / FPS])[0]) for i in range(45)] == list(range(45))


@pytest.mark.parametrize(("codec", "gop"), CASES)
def test_sparse_requests_in_one_call_match_single_requests(videos: dict, codec: str, gop: int) -> None:
    # Sparse requests let the decoder skip whole GOPs; the frames must not change because of it.
    times = [0.0, 0.4, 0.8333, 1.2, 1.4667]
    together = decode_frames(videos[codec, gop], times)
    alone = [decode_frames(videos[codec, gop], [t])[0] for t in times]
    assert [number_in(f) for f in together] == [0, 12, 25, 36, 44]
    assert all(np.array_equal(a, b) for a, b in zip(together, alone, strict=True))


def test_probe_reads_the_header(videos: dict) -> None:
    info = probe_video(videos["h264", 10])
    assert (info.codec, info.width, info.height, info.fps, info.frames) == ("h264", W, H, 30.0, 45)
    assert info.duration_s == pytest.approx(1.5)
    assert info.pix_fmt == "yuv420p"


@pytest.mark.skipif(not HAS_AV1, reason=NO_AV1)
def test_probe_names_av1(videos: dict) -> None:
    assert probe_video(videos["av1", 10]).codec == "av1"


def test_episodes_concatenated_in_one_file_are_found_by_offset(tmp_path: Path) -> None:
    lengths = [10, 15, 12]  # three episodes back to back; each starts at the previous frame count / fps
    path = write_video(tmp_path / "file-000.mp4", range(sum(lengths)))
    starts = [0, 10, 25]
    for episode, (start, length) in enumerate(zip(starts, lengths, strict=True)):
        frames = decode_frames(path, [0.0, (length - 1) / FPS], offset=start / FPS, episode_index=episode)
        assert [number_in(f) for f in frames] == [start, start + length - 1]


def test_unsorted_and_repeated_times_come_back_in_request_order(videos: dict) -> None:
    frames = decode_frames(videos["h264", 10], [1.0, 0.1, 1.0, 0.5, 0.1])
    assert [number_in(f) for f in frames] == [30, 3, 30, 15, 3]
    frames[0][:] = 0  # a repeated frame is a separate array: editing one leaves the other alone
    assert number_in(frames[2]) == 30


def test_times_between_frames_snap_to_the_nearest_within_half_a_frame(videos: dict) -> None:
    period = 1 / FPS
    times = [
        10 * period + 0.4 * period,
        10 * period - 0.4 * period,
        10.5 * period,
        -0.4 * period,
        44.4 * period,
    ]
    frames = decode_frames(videos["h264", 10], times)
    # exactly midway goes to the earlier frame, the one on screen at that instant
    assert [number_in(f) for f in frames] == [10, 10, 10, 0, 44]


@pytest.mark.parametrize("t", [45.6 / FPS, 10.0, -0.6 / FPS])
def test_time_outside_the_video_names_file_episode_and_time(videos: dict, t: float) -> None:
    with pytest.raises(VideoError) as caught:
        decode_frames(videos["h264", 10], [0.0, t], episode_index=7)
    message = str(caught.value)
    assert "h264-10.mp4" in message and "episode 7" in message and f"t={t:.4f}" in message
    assert "\n" not in message


def test_non_finite_time_is_refused(videos: dict) -> None:
    with pytest.raises(VideoError, match="not a finite number"):
        decode_frames(videos["h264", 10], [float("nan")])


def test_no_times_gives_no_frames(videos: dict) -> None:
    assert decode_frames(videos["h264", 10], []) == []


def test_missing_file_names_file_and_episode(tmp_path: Path) -> None:
    missing = tmp_path / "videos" / "file-009.mp4"
    with pytest.raises(VideoNotFoundError) as caught:
        decode_frames(missing, [0.0], episode_index=3)
    assert str(missing) in str(caught.value) and "episode 3" in str(caught.value)
    assert isinstance(caught.value, FileNotFoundError)
    with pytest.raises(VideoNotFoundError):
        probe_video(missing)


def test_random_bytes_are_a_video_error(tmp_path: Path) -> None:
    junk = tmp_path / "junk.mp4"
    junk.write_bytes(np.random.default_rng(0).integers(0, 256, 20_000, dtype=np.uint8).tobytes())
    with pytest.raises(VideoError) as caught:
        decode_frames(junk, [0.0], episode_index=5)
    assert "junk.mp4" in str(caught.value) and "episode 5" in str(caught.value)
    with pytest.raises(VideoError):
        probe_video(junk)


def test_truncated_file_is_a_video_error(videos: dict, tmp_path: Path) -> None:
    data = videos["h264", 10].read_bytes()
    cut = tmp_path / "cut.mp4"
    cut.write_bytes(data[: len(data) // 2])  # the index (moov) is written last, so it is gone
    with pytest.raises(VideoError, match="cut.mp4"):
        decode_frames(cut, [0.0])


def test_four_threads_at_once_get_the_same_frames(videos: dict) -> None:
    requests = [[i / FPS for i in range(start, 45, 4)] for start in range(4)] * 2
    alone = [[number_in(f) for f in decode_frames(videos["h264", 10], r)] for r in requests]
    with ThreadPoolExecutor(max_workers=4) as pool:
        together = list(
            pool.map(lambda r: [number_in(f) for f in decode_frames(videos["h264", 10], r)], requests)
        )
    assert together == alone
    assert alone[0] == list(range(0, 45, 4))


def test_real_lerobot_video_decodes_distinct_frames() -> None:
    video = shared_path(*LINGZU_VIDEO)
    times = [0.0, 3.0, 7.5, 14.2]  # 14.2 s is the episode's last frame
    frames = decode_frames(video, times, episode_index=0)
    assert all(f.shape == (480, 640, 3) and f.dtype == np.uint8 for f in frames)
    assert all(not np.array_equal(a, b) for i, a in enumerate(frames) for b in frames[i + 1 :])
    assert np.array_equal(frames[2], decode_frames(video, [7.5])[0])
    info = probe_video(video)
    assert (info.width, info.height, info.fps, info.frames) == (640, 480, 30.0, 427)


# -- encoding -------------------------------------------------------------------------------------


def test_written_frame_i_is_at_i_over_fps(videos: dict) -> None:
    with av.open(str(videos["h264", 10])) as container:
        times = [frame.time for frame in container.decode(video=0)]
    assert times == pytest.approx([i / FPS for i in range(45)], abs=1e-9)


def test_same_frames_give_the_same_bytes(tmp_path: Path) -> None:
    first = write_video(tmp_path / "a.mp4", range(20)).read_bytes()
    assert write_video(tmp_path / "b.mp4", range(20)).read_bytes() == first


def test_failed_block_leaves_the_old_file_and_no_temp(tmp_path: Path) -> None:
    target = write_video(tmp_path / "file-000.mp4", range(5))
    old = target.read_bytes()
    with pytest.raises(RuntimeError, match="camera unplugged"), VideoWriter(target, FPS, W, H) as writer:
        writer.write(pattern(1))
        raise RuntimeError("camera unplugged")
    assert target.read_bytes() == old
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file-000.mp4"]


def test_bad_frames_and_settings_are_refused(tmp_path: Path) -> None:
    target = tmp_path / "v.mp4"
    with pytest.raises(ValueError, match="uint8"), VideoWriter(target, FPS, W, H) as writer:
        writer.write(np.zeros((H, W, 3), np.float32))
    with pytest.raises(WriteError, match="no frames"), VideoWriter(target, FPS, W, H):
        pass
    with pytest.raises(ConfigError, match="even"):
        VideoWriter(target, FPS, 127, H)
    with pytest.raises(ConfigError, match="unknown or unavailable"):
        VideoWriter(target, FPS, W, H, codec="nosuchcodec")
    assert list(tmp_path.iterdir()) == []


def test_available_codecs_lists_h264_both_ways() -> None:
    h264 = available_codecs()["h264"]
    assert h264.encoders and "h264" in h264.decoders
    assert "av1" not in available_codecs()["av1"].decoders  # FFmpeg's native AV1 decoder needs hardware


@pytest.mark.skipif(not HAS_AV1, reason=NO_AV1)
def test_av1_by_family_name_uses_a_real_encoder(tmp_path: Path) -> None:
    writer = VideoWriter(tmp_path / "x.mp4", FPS, W, H, codec="av1")
    assert writer.encoder in ("libsvtav1", "libaom-av1", "librav1e")


def test_killed_writer_leaves_the_previous_file_intact(tmp_path: Path) -> None:
    target = write_video(tmp_path / "file-000.mp4", range(5))
    old = target.read_bytes()
    script = textwrap.dedent(
        f"""
        import sys, numpy as np
        from steerable.dataset.video import VideoWriter
        with VideoWriter({str(target)!r}, 30, {W}, {H}) as writer:
            for i in range(10**9):
                writer.write(np.full(({H}, {W}, 3), i % 256, np.uint8))
                if i == 30:
                    print("writing", flush=True)
        """
    )
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "writing"
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.wait(timeout=30)
    assert target.read_bytes() == old
    assert [number_in(f) for f in decode_frames(target, [0.0, 4 / FPS])] == [0, 4]


def test_decoded_pixels_equal_pyavs_own_conversion_of_each_frame() -> None:
    """decode_frames converts with one swscale context per stream (20-40x cheaper than a frame's own
    `to_ndarray(format="rgb24")`, which sets one up per frame); the pixels must be exactly PyAV's."""
    path = sorted(shared_path("lingzu_teleop_4").glob("videos/*/chunk-000/file-000.mp4"))[0]
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        start = float(stream.start_time * stream.time_base) if stream.start_time else 0.0
        frames = [(float(f.pts * stream.time_base) - start, f.to_ndarray(format="rgb24"))
                  for _, f in zip(range(40), container.decode(stream), strict=False)]
    got = decode_frames(path, [t for t, _ in frames], offset=start)
    assert len(got) == len(frames)
    for (_, want), mine in zip(frames, got, strict=True):
        assert np.array_equal(want, mine)
