"""Decode an mp4's frames at given times in one forward pass, and probe what a video file holds."""

from __future__ import annotations

import bisect
import contextlib
import logging
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import av
import numpy as np
from av.container import InputContainer
from av.video.reformatter import VideoReformatter
from av.video.stream import VideoStream

from steerable.errors import VideoError, VideoNotFoundError

__all__ = ["VideoInfo", "decode_frames", "probe_video"]

logger = logging.getLogger(__name__)

# Decode order may run ahead of presentation order by up to 16 frames (the H.264 limit): seek this
# many frame periods early and read this many packets past the last request before stopping.
_REORDER_SLACK = 16
# Float slack on the half-frame tolerance, so a time exactly between two frames still matches one.
_EPS = 1e-6
# Threads of the RGB conversion (swscale). PyAV's default, FFmpeg's automatic count, wakes a pool of
# threads for every frame: at 224x160 that was ~4.5 voluntary context switches a frame, most of the
# decode's system time, and a frame 30 % slower (on a busy machine each frame waited for every thread
# to get a core); no faster at 640x480 (benchmarks/README.md, "Where `steerable train`'s time goes").
# One thread gives the same pixels (tests/test_decode_threads.py).
CONVERT_THREADS = 1
# PyAV before 16 (LeRobot 0.6 pins av < 16) has no `threads` on `reformat`; set on the first call.
_reformat_takes_threads: bool | None = None


def _rgb(reformatter: Any, frame: Any) -> Any:
    """`frame` converted to rgb24 on `CONVERT_THREADS` threads where this PyAV lets us say so."""
    global _reformat_takes_threads
    if _reformat_takes_threads is not False:
        try:
            out = reformatter.reformat(frame, format="rgb24", threads=CONVERT_THREADS)
            _reformat_takes_threads = True
            return out
        except TypeError:
            if _reformat_takes_threads:
                raise
            _reformat_takes_threads = False
    return reformatter.reformat(frame, format="rgb24")


@dataclass(frozen=True)
class VideoInfo:
    """What a video file holds: codec family, frame size and rate, frame count and length if known."""

    codec: str
    width: int
    height: int
    fps: float
    frames: int | None
    duration_s: float | None
    pix_fmt: str


def _where(path: Path, episode_index: int | None) -> str:
    return f"video {path}" + ("" if episode_index is None else f" (episode {episode_index})")


def _reason(exc: BaseException) -> str:
    return str(getattr(exc, "strerror", None) or exc).replace("\n", " ")


@contextlib.contextmanager
def _open_stream(path: Path, episode_index: int | None) -> Iterator[tuple[InputContainer, VideoStream]]:
    """Open the first video stream of `path`; PyAV failures inside the block become a VideoError."""
    where = _where(path, episode_index)
    if not path.is_file():
        raise VideoNotFoundError(
            f"{where} does not exist; the dataset's videos are incomplete: fetch them again"
        )
    try:
        container = av.open(str(path), mode="r")
    except av.error.FFmpegError as exc:
        raise VideoError(
            f"{where} cannot be opened ({_reason(exc)}); "
            "it is corrupt or not a video: replace or re-encode it"
        ) from exc
    try:
        if not container.streams.video:
            raise VideoError(f"{where} has no video stream; replace it with the camera's mp4")
        yield container, container.streams.video[0]
    except av.error.FFmpegError as exc:
        raise VideoError(
            f"{where} cannot be decoded ({_reason(exc)}); the file is corrupt: replace or re-encode it"
        ) from exc
    finally:
        container.close()


def _frame_rate(stream: VideoStream, where: str) -> Fraction:
    rate = stream.average_rate or stream.guessed_rate or stream.base_rate
    if not rate:
        raise VideoError(f"{where} declares no frame rate; re-encode it at a constant frame rate")
    return Fraction(rate)


def _time_base(stream: VideoStream, where: str) -> Fraction:
    if not stream.time_base:
        raise VideoError(f"{where} declares no time base; re-encode it")
    return stream.time_base


def _span(stream: VideoStream, time_base: Fraction) -> str:
    """Describe the file's time range for error messages, from the stream header."""
    if stream.duration is None:
        return "its length is unknown"
    start = float((stream.start_time or 0) * time_base)
    return f"the file covers {start:.3f}-{start + float(stream.duration * time_base):.3f} s"


def probe_video(path: Path) -> VideoInfo:
    """Read a video's header: codec, size, frame rate, frame count and duration (None if not stored)."""
    path = Path(path)
    where = _where(path, None)
    with _open_stream(path, None) as (container, stream):
        ctx = stream.codec_context
        duration: float | None = None
        if stream.duration is not None:
            duration = float(stream.duration * _time_base(stream, where))
        elif container.duration is not None:
            duration = container.duration / av.time_base
        return VideoInfo(
            codec=ctx.codec.canonical_name,
            width=ctx.width,
            height=ctx.height,
            fps=float(_frame_rate(stream, where)),
            frames=stream.frames or None,
            duration_s=duration,
            pix_fmt=str(ctx.pix_fmt),
        )


class _Wanted:
    """The sorted, distinct file times requested, with a fast "is time t within tolerance" test."""

    def __init__(self, times: list[float], period: float) -> None:
        self.times = times
        self.period = period
        self.tol = period / 2 + _EPS

    def near(self, t: float) -> bool:
        i = bisect.bisect_left(self.times, t - self.tol)
        return i < len(self.times) and self.times[i] <= t + self.tol


def _scan(
    container: InputContainer, stream: VideoStream, time_base: Fraction, wanted: _Wanted
) -> list[tuple[float, av.VideoFrame]]:
    """Return (time, frame) for every frame within tolerance of a request, sorted by time.

    One forward pass over the packets from a keyframe before the first request. Packet times are known
    before decoding, so a GOP is decoded only up to its last needed packet and GOPs holding no requested
    frame are skipped entirely: with short GOPs and sparse requests that is most of the file.
    """
    tb = float(time_base)
    start = wanted.times[0] - wanted.tol - _REORDER_SLACK * wanted.period
    if start > (stream.start_time or 0) * tb:
        container.seek(math.floor(start / tb), stream=stream, backward=True, any_frame=False)
    codec = stream.codec_context
    last = wanted.times[-1] + wanted.tol
    kept: list[tuple[float, av.VideoFrame]] = []
    pending: list[av.Packet[VideoStream]] = []  # packets of the current GOP not sent to the decoder yet
    past_last = decoded = 0

    def keep(frames: list[av.VideoFrame]) -> None:
        for frame in frames:
            if frame.pts is not None and wanted.near(frame.pts * tb):
                kept.append((frame.pts * tb, frame))

    for packet in container.demux(stream):
        if packet.size == 0:  # the demuxer's end-of-stream marker
            break
        if packet.is_keyframe:
            pending.clear()
        pending.append(packet)
        t = None if packet.pts is None else packet.pts * tb
        if t is None or wanted.near(t):
            for queued in pending:
                keep(codec.decode(queued))
            decoded += len(pending)
            pending.clear()
        past_last = past_last + 1 if t is not None and t > last else 0
        if past_last >= _REORDER_SLACK:
            break
    keep(codec.decode(None))
    logger.debug("%s: decoded %d packets for %d requested times", container.name, decoded, len(wanted.times))
    kept.sort(key=lambda item: item[0])
    return kept


def _nearest(times: list[float], t: float, tol: float) -> int | None:
    """Index in sorted `times` of the one nearest to `t` within `tol` (the earlier on a tie), or None."""
    i = bisect.bisect_left(times, t)
    before = i - 1 if i > 0 and t - times[i - 1] <= tol else None
    after = i if i < len(times) and times[i] - t <= tol else None
    if before is None or after is None:
        return after if before is None else before
    # A time midway between two frames (4 Hz sampling of 30 fps video) must not be decided by float
    # noise: it gets the earlier frame, the one on screen at that instant.
    return before if t - times[before] <= times[after] - t + _EPS else after


def decode_frames(
    path: Path, timestamps: Sequence[float], *, offset: float = 0.0, episode_index: int | None = None,
    threads: int | None = None,
) -> list[np.ndarray]:
    """Return the RGB frames (H x W x 3 uint8) shown at episode times `timestamps`, in request order.

    File time is `offset + t` (`offset`: the episode's start inside a file shared by several episodes).
    Each request gets the frame whose timestamp is nearest, if within half a frame period.
    `threads` is the decoder's thread count (None: FFmpeg's automatic count; the pixels are the same).
    """
    path = Path(path)
    where = _where(path, episode_index)
    if len(timestamps) == 0:
        return []
    bad = [t for t in timestamps if not math.isfinite(t)]
    if bad:
        raise VideoError(f"{where}: requested time {bad[0]} is not a finite number of seconds")
    with _open_stream(path, episode_index) as (container, stream):
        if threads is not None:  # before the first packet: the decoder opens then
            stream.codec_context.thread_count = threads
        wanted = _Wanted(
            sorted({offset + float(t) for t in timestamps}), 1 / float(_frame_rate(stream, where))
        )
        time_base = _time_base(stream, where)
        kept = _scan(container, stream, time_base, wanted)
        times = [t for t, _ in kept]
        rgb: dict[int, np.ndarray] = {}  # index in `kept` -> its RGB array, converted once
        # One converter for the whole stream: a frame's own `to_ndarray(format=...)` sets up a fresh
        # swscale context per frame, which costs 20-40x the conversion itself (same pixels).
        to_rgb = VideoReformatter()
        out: list[np.ndarray] = []
        for t in timestamps:
            index = _nearest(times, offset + float(t), wanted.tol)
            if index is None:
                raise VideoError(
                    f"{where} has no frame within half a frame ({wanted.period / 2:.4f} s) of "
                    f"t={float(t):.4f} s (file time {offset + float(t):.4f} s); "
                    f"{_span(stream, time_base)}: ask only for times inside the episode"
                )
            if index in rgb:  # a repeated frame gets its own copy, so callers may edit arrays in place
                out.append(rgb[index].copy())
            else:
                frame = _rgb(to_rgb, kept[index][1])
                rgb[index] = frame.to_ndarray()
                out.append(rgb[index])
        return out
