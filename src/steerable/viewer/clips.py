"""Episode video clips a browser can play: which files play as they are, and cutting one episode out.

Chromium plays H.264, VP9 and AV1 in mp4; datasets in the wild also hold MPEG-4 part 2 and other
codecs. Those, and every clip of the static export, are re-encoded to H.264 with the dataset
encoder, one episode at a time and frame by frame (memory stays at one frame).
"""

from __future__ import annotations

import logging
from functools import lru_cache
from pathlib import Path

import av

from steerable.dataset.video_decode import probe_video
from steerable.dataset.video_encode import VideoWriter
from steerable.errors import SteerableError, VideoError

__all__ = ["BROWSER_CODECS", "browser_playable", "cut_clip"]

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
    """Write the frames of `src` shown in [start, end) seconds to `dst` as H.264; returns their count.

    Frame i of the clip is shown at i / fps, so clip time equals episode time.
    """
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
