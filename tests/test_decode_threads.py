"""Training frames are decoded on one thread (issue 35): FFmpeg's automatic thread counts woke a pool of
swscale threads for every frame (~4.5 context switches a frame while `steerable train` decoded its
episodes), and, on streams with several slices or AV1, a pool of decoder threads too, for the same
pixels."""

from __future__ import annotations

import resource
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import steerable.dataset.video_decode as video_decode
import steerable.train.images as images
from shared_data import shared_path
from steerable.dataset.video import VideoWriter, decode_frames
from steerable.train.images import resized_frames

FPS = 15
W, H = 224, 160  # the synthetic generator's camera size, what the default training decodes
FRAMES = 120


def _frame(i: int) -> np.ndarray:
    """A smooth moving gradient with a square: chroma and edges for the YUV -> RGB conversion to round."""
    y, x = np.mgrid[0:H, 0:W]
    img = np.stack([(x * 255 // W + 3 * i) % 256, (y * 255 // H + 5 * i) % 256, ((x + y + 7 * i) // 2) % 256], -1)
    img[40:80, 20 + i % 150: 60 + i % 150] = (250, 30, 90)
    return img.astype(np.uint8)


@pytest.fixture(scope="module")
def video(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """224x160 h264 written with the encoder's automatic threads: several slices a frame, so the decoder's
    automatic threads have work to wake for (steerable's own builder writes one slice)."""
    path = tmp_path_factory.mktemp("threads") / "cam.mp4"
    with VideoWriter(path, FPS, W, H, codec="h264", gop=10) as writer:
        for i in range(FRAMES):
            writer.write(_frame(i))
    return path


class _OneVideo:
    """The one method of a LeRobotDataset that `resized_frames` calls, on one file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.threads: list[int | None] = []

    def decode_frames(self, episode_index: int, camera: str, timestamps: Sequence[float], *,
                      threads: int | None = None) -> list[np.ndarray]:
        self.threads.append(threads)
        return decode_frames(self.path, timestamps, threads=threads)


@pytest.fixture(autouse=True)
def _one_torch_thread() -> Iterator[None]:
    """The trainer's setting for the tiny model: on a busy 2-core machine torch's second intra-op thread
    made each small resize ~20x slower, which would only slow these tests down."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _times() -> list[float]:
    return [i / FPS for i in range(FRAMES)]


def test_the_rgb_conversion_is_asked_for_one_thread(video: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[Any] = []
    real = video_decode.VideoReformatter

    class Spy:
        def __init__(self) -> None:
            self.inner = real()

        def reformat(self, frame: Any, **kwargs: Any) -> Any:
            asked.append(kwargs.get("threads"))
            return self.inner.reformat(frame, **kwargs)

    monkeypatch.setattr(video_decode, "VideoReformatter", Spy)
    decode_frames(video, _times()[:20])
    assert asked == [1] * 20


def test_training_frames_ask_the_decoder_for_one_thread(video: Path) -> None:
    source = _OneVideo(video)
    resized_frames(source, 0, "observation.images.top", _times(), 32)  # type: ignore[arg-type]
    assert source.threads == [1]


@pytest.mark.parametrize("source", ["several slices", "lingzu"])
def test_one_thread_gives_the_pixels_of_ffmpegs_automatic_counts(
    video: Path, source: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if source == "several slices":
        path, times = video, _times()
    else:  # a real 640x480 LeRobot camera
        path = sorted(shared_path("lingzu_teleop_4").glob("videos/*/chunk-000/file-000.mp4"))[0]
        times = [i / 30 for i in range(60)]
    one = decode_frames(path, times, threads=1)
    monkeypatch.setattr(video_decode, "CONVERT_THREADS", 0)  # FFmpeg's automatic count, as before
    auto = decode_frames(path, times)
    assert len(one) == len(auto) == len(times)
    for a, b in zip(one, auto, strict=True):
        assert np.array_equal(a, b)


def test_training_frames_are_the_pixels_of_before(video: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    now = resized_frames(_OneVideo(video), 0, "cam", _times(), 32)  # type: ignore[arg-type]
    monkeypatch.setattr(video_decode, "CONVERT_THREADS", 0)
    monkeypatch.setattr(images, "DECODE_THREADS", None)
    before = resized_frames(_OneVideo(video), 0, "cam", _times(), 32)  # type: ignore[arg-type]
    assert torch.equal(now, before)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="context-switch counts read from Linux getrusage")
def test_decoding_training_frames_does_not_switch_threads_per_frame(video: Path) -> None:
    source = _OneVideo(video)
    resized_frames(source, 0, "cam", _times()[:2], 32)  # type: ignore[arg-type]  # start-up, not counted
    before = resource.getrusage(resource.RUSAGE_SELF).ru_nvcsw
    resized_frames(source, 0, "cam", _times(), 32)  # type: ignore[arg-type]
    switches = resource.getrusage(resource.RUSAGE_SELF).ru_nvcsw - before
    # One thread blocks on nothing (the file is in the page cache); the automatic pools gave ~7 a frame.
    assert switches < FRAMES // 4, f"{switches} voluntary context switches for {FRAMES} frames"


def test_a_pyav_without_threads_on_reformat_decodes_the_same(video: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """PyAV before 16 (what LeRobot 0.6 pins) takes no `threads`: the conversion runs without it."""
    real = video_decode.VideoReformatter

    class Old:
        def __init__(self) -> None:
            self.inner = real()

        def reformat(self, frame: Any, *, format: str) -> Any:  # noqa: A002  # PyAV's own keyword
            return self.inner.reformat(frame, format=format)

    expected = decode_frames(video, _times()[:5])
    monkeypatch.setattr(video_decode, "VideoReformatter", Old)
    monkeypatch.setattr(video_decode, "_reformat_takes_threads", None)
    got = decode_frames(video, _times()[:5])
    assert all(np.array_equal(a, b) for a, b in zip(got, expected, strict=True))
