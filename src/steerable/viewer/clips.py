"""Episode video clips a browser can play: which files play as they are, and cutting one episode out.

Chromium plays H.264, VP9 and AV1 in mp4; datasets in the wild also hold MPEG-4 part 2 and other
codecs. A clip is remuxed (packets copied, no re-encoding) when the source plays in a browser and the
episode is a whole run of GOPs (it starts on a keyframe and the next keyframe starts the next
episode, as LeRobot's and our writers encode); otherwise it is re-encoded to H.264 with the dataset
encoder, frame by frame (memory stays at one frame).
"""

from __future__ import annotations

import logging
from functools import lru_cache
from pathlib import Path

import av
from av.container import InputContainer

from steerable.dataset.atomic import atomic_path
from steerable.dataset.video_decode import probe_video
from steerable.dataset.video_encode import VideoWriter
from steerable.errors import SteerableError, VideoError

__all__ = ["BROWSER_CODECS", "browser_playable", "cut_clip", "remux_clip"]

logger = logging.getLogger(__name__)

BROWSER_CODECS = frozenset({"h264", "vp8", "vp9", "av1"})


@lru_cache(maxsize=256)
def _codec(path: Path, mtime: float) -> str:
    return probe_video(path).codec


def browser_playable(path: Path) -> bool:
    """Whether a browser's <video> plays `path` as it is (judged by its codec)."""
    try:
        return _codec(path, path.stat().st_mtime) in BROWSER_CODECS
    except (OSError, SteerableError):
        return False


def cut_clip(src: Path, dst: Path, start: float, end: float, fps: int) -> int:
    """Write the frames of `src` shown in [start, end) seconds to `dst`; returns their count.

    Remuxed where possible (see `remux_clip`), else re-encoded to H.264. Either way frame i of the clip
    is shown at i / fps, so clip time equals episode time.
    """
    if browser_playable(src):
        copied = remux_clip(src, dst, start, end, fps)
        if copied is not None:
            return copied
    return _encode_clip(src, dst, start, end, fps)


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


def _encode_clip(src: Path, dst: Path, start: float, end: float, fps: int) -> int:
    half = 0.5 / fps
    written = 0
    try:
        with av.open(str(src)) as container:
            stream = container.streams.video[0]
            stream.thread_type = "AUTO"
            if start > 0 and stream.time_base is not None:
                container.seek(int(max(0.0, start - half) / stream.time_base), stream=stream, backward=True)
            writer: VideoWriter | None = None
            try:
                for frame in container.decode(stream):
                    t = frame.time
                    if t is None or t < start - half:
                        continue
                    if t >= end - half:
                        break
                    rgb = frame.to_ndarray(format="rgb24")
                    rgb = rgb[: rgb.shape[0] // 2 * 2, : rgb.shape[1] // 2 * 2]  # yuv420p needs even sizes
                    if writer is None:
                        writer = VideoWriter(
                            dst, fps, rgb.shape[1], rgb.shape[0], codec="h264", crf=26, preset="veryfast"
                        )
                        writer.__enter__()
                    writer.write(rgb)
                    written += 1
            finally:
                if writer is not None:
                    writer.__exit__(None, None, None)
    except av.error.FFmpegError as exc:
        raise VideoError(f"cannot cut {src} [{start:.3f}, {end:.3f}) s: {exc}") from exc
    if written == 0:
        raise VideoError(f"{src} has no frame in [{start:.3f}, {end:.3f}) s")
    logger.info("cut %s [%.3f, %.3f) -> %s (%d frames)", src, start, end, dst, written)
    return written
