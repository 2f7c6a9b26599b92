"""Episode video clips a browser can play: which files play as they are, and cutting one episode out.

Chromium plays H.264, VP9 and AV1 in mp4; datasets in the wild also hold MPEG-4 part 2 and other
codecs. A clip is remuxed (packets copied, no re-encoding) when the source plays in a browser and the
episode is a whole run of GOPs (it starts on a keyframe and the next keyframe starts the next
episode, as LeRobot's and our writers encode); otherwise it is re-encoded to H.264 with the dataset
encoder, frame by frame (memory stays at one frame): each decoded frame goes to the encoder as it
is (no RGB round trip), with x264's fastest preset, in the baseline profile every browser plays,
and the index at the front of the file (faststart). `ClipPool` cuts many clips at once, on a thread
pool bounded by the cores (PyAV decodes and encodes without holding the GIL).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from functools import lru_cache
from pathlib import Path
from types import TracebackType

import av
from av.container import InputContainer

from steerable.dataset.atomic import atomic_path
from steerable.dataset.video_decode import probe_video
from steerable.dataset.video_encode import VideoWriter
from steerable.errors import SteerableError, VideoError

__all__ = ["BROWSER_CODECS", "ClipPool", "available_cores", "browser_playable", "cut_clip", "remux_clip"]

logger = logging.getLogger(__name__)

BROWSER_CODECS = frozenset({"h264", "vp8", "vp9", "av1"})
# Re-encoding is for looking, not for keeping: x264's fastest preset (3x less CPU than `veryfast` on
# 640x480 MPEG-4 part 2 sources, about 0.5 dB PSNR lower at this CRF, files about twice the size),
# in the constrained baseline profile (no B-frames, no CABAC) that every browser decodes.
CLIP_PRESET, CLIP_CRF, CLIP_OPTIONS = "ultrafast", 28, {"profile": "baseline"}


def available_cores() -> int:
    """The CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


@lru_cache(maxsize=256)
def _codec(path: Path, mtime: float) -> str:
    return probe_video(path).codec


def browser_playable(path: Path) -> bool:
    """Whether a browser's <video> plays `path` as it is (judged by its codec)."""
    try:
        return _codec(path, path.stat().st_mtime) in BROWSER_CODECS
    except (OSError, SteerableError):
        return False


def cut_clip(
    src: Path,
    dst: Path,
    start: float,
    end: float,
    fps: int,
    *,
    threads: int | None = None,
    stop: threading.Event | None = None,
) -> int:
    """Write the frames of `src` shown in [start, end) seconds to `dst`; returns their count.

    Remuxed where possible (see `remux_clip`), else re-encoded to H.264 with `threads` decoder and
    encoder threads (None: the codecs decide). Either way frame i of the clip is shown at i / fps, so
    clip time equals episode time. Once `stop` is set, a re-encode ends at the next frame, writing nothing.
    """
    if browser_playable(src):
        copied = remux_clip(src, dst, start, end, fps)
        if copied is not None:
            return copied
    return _encode_clip(src, dst, start, end, fps, threads, stop)


class ClipStopped(SteerableError):
    """A re-encode ended early because its pool is stopping; nothing was written."""


class ClipPool:
    """Cuts clips on at most `workers` threads (default: one per two cores, never more than `jobs`).

    Each re-encode gets the cores per worker, at least 2, as decoder and encoder threads: x264 and
    the decoder run two frames at once, which beats two single-threaded clips side by side where
    the cores are shared with other work (measured on 2 busy cores), and one clip alone gets every
    core. Leaving the block on an exception (Ctrl-C, a SIGTERM turned into one) stops the running
    re-encodes at their next frame and drops the queued ones, so the process ends within a frame's time.
    """

    def __init__(self, jobs: int, workers: int | None = None) -> None:
        cores = available_cores()
        self.workers = max(1, min(workers or cores // 2, max(jobs, 1)))
        self.threads = max(2, cores // self.workers)
        self._stop = threading.Event()
        self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="steerable-clip")

    def submit(self, src: Path, dst: Path, start: float, end: float, fps: int) -> Future[int]:
        return self._pool.submit(cut_clip, src, dst, start, end, fps, threads=self.threads, stop=self._stop)

    def __enter__(self) -> ClipPool:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc is not None:
            self._stop.set()
        self._pool.shutdown(wait=True, cancel_futures=exc is not None)


class _NotAligned(Exception):
    """Internal: the episode is not a whole run of GOPs in its file; nothing is kept."""


def remux_clip(src: Path, dst: Path, start: float, end: float, fps: int) -> int | None:
    """Copy the packets of the frames in [start, end) to `dst`; None (nothing written) if not GOP-aligned."""
    try:
        with av.open(str(src)) as container, atomic_path(dst, durable=False) as tmp:
            copied = _copy_packets(container, tmp, start, end, fps)
    except _NotAligned as why:
        logger.info("re-encoding %s [%.3f, %.3f): %s", src, start, end, why)
        return None
    except av.error.FFmpegError as exc:
        logger.info("re-encoding %s [%.3f, %.3f): remux failed (%s)", src, start, end, exc)
        return None
    return copied


def _copy_packets(container: InputContainer, tmp: Path, start: float, end: float, fps: int) -> int:
    half = 0.5 / fps
    stream = container.streams.video[0]
    tb = stream.time_base
    if tb is None:
        raise _NotAligned("no time base")
    container.seek(int(max(0.0, start - half) / tb), stream=stream, backward=True)
    first: int | None = None
    copied = 0
    with av.open(str(tmp), mode="w", format="mp4") as out:
        target = out.add_stream_from_template(stream)
        for packet in container.demux(stream):
            if packet.pts is None or packet.dts is None:
                continue
            t = float(packet.pts * tb)
            if first is None:
                if t < start - half:
                    continue
                if not packet.is_keyframe or t > start + half:
                    raise _NotAligned("the episode does not start on a keyframe")
                first = packet.pts
            if t >= end - half:
                if packet.is_keyframe:
                    break  # the next episode's first frame
                raise _NotAligned("a GOP runs across the episode's end")
            packet.pts -= first
            packet.dts -= first
            packet.stream = target
            out.mux(packet)
            copied += 1
    if copied != round((end - start) * fps):
        raise _NotAligned(f"{copied} frames in the range, expected {round((end - start) * fps)}")
    return copied


def _encode_clip(
    src: Path, dst: Path, start: float, end: float, fps: int, threads: int | None, stop: threading.Event | None
) -> int:
    half = 0.5 / fps
    written = 0
    try:
        with av.open(str(src)) as container:
            stream = container.streams.video[0]
            stream.thread_type = "AUTO"
            if threads is not None:
                stream.codec_context.thread_count = threads
            if start > 0 and stream.time_base is not None:
                container.seek(int(max(0.0, start - half) / stream.time_base), stream=stream, backward=True)
            with contextlib.ExitStack() as stack:  # an exception leaves no file: the writer removes its own
                writer: VideoWriter | None = None
                for frame in container.decode(stream):
                    if stop is not None and stop.is_set():
                        raise ClipStopped(f"stopped cutting {src}")
                    t = frame.time
                    if t is None or t < start - half:
                        continue
                    if t >= end - half:
                        break
                    if writer is None:
                        # yuv420p needs even sizes: an odd one is scaled to the even size below it
                        writer = stack.enter_context(VideoWriter(
                            dst, fps, frame.width // 2 * 2, frame.height // 2 * 2, codec="h264", crf=CLIP_CRF,
                            preset=CLIP_PRESET, options=CLIP_OPTIONS, threads=threads, faststart=True,
                        ))
                    writer.write_frame(frame)
                    written += 1
    except av.error.FFmpegError as exc:
        raise VideoError(f"cannot cut {src} [{start:.3f}, {end:.3f}) s: {exc}") from exc
    if written == 0:
        raise VideoError(f"{src} has no frame in [{start:.3f}, {end:.3f}) s")
    logger.info("cut %s [%.3f, %.3f) -> %s (%d frames)", src, start, end, dst, written)
    return written
