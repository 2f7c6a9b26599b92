"""Write RGB frames to an mp4 (H.264 or AV1) atomically, frame i shown at exactly i / fps seconds."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from fractions import Fraction
from pathlib import Path
from types import TracebackType
from typing import cast

import av
import numpy as np
from av.container import OutputContainer
from av.video.stream import VideoStream

from steerable.dataset.atomic import atomic_path
from steerable.dataset.video_codecs import resolve_encoder
from steerable.errors import ConfigError, WriteError

__all__ = ["VideoWriter"]


class VideoWriter:
    """Context manager that encodes frames to `path`; the file appears only if the block succeeds.

    `codec` is a family ("h264", "av1") or an encoder name ("libx264", "libsvtav1"); `gop` is the
    keyframe interval in frames and `preset` the encoder's speed preset ("veryfast" for x264, "0".."13"
    for SVT-AV1); None keeps the encoder's default. `options` are further encoder options (x264:
    `profile`, `tune`), `threads` the encoder's thread count (None: the encoder decides), and
    `faststart` puts the index at the front of the file, so a browser plays it before it has it all.
    Frames are H x W x 3 uint8 RGB (`write`) or decoded PyAV frames (`write_frame`).
    """

    def __init__(
        self,
        path: Path,
        fps: int,
        width: int,
        height: int,
        codec: str = "h264",
        crf: int = 23,
        pix_fmt: str = "yuv420p",
        gop: int | None = None,
        preset: str | None = None,
        options: Mapping[str, str] | None = None,
        threads: int | None = None,
        faststart: bool = False,
    ) -> None:
        if fps <= 0 or width <= 0 or height <= 0:
            raise ConfigError(f"video fps, width and height must be positive, got {fps}, {width}x{height}")
        if "420" in pix_fmt and (width % 2 or height % 2):
            raise ConfigError(
                f"{pix_fmt} needs an even frame size, got {width}x{height}: crop or pad the frames"
            )
        if gop is not None and gop <= 0:
            raise ConfigError(f"gop (keyframe interval) must be a positive number of frames, got {gop}")
        self.path = Path(path)
        self.fps, self.width, self.height = fps, width, height
        self.encoder = resolve_encoder(codec)
        self.crf, self.pix_fmt, self.gop, self.preset = crf, pix_fmt, gop, preset
        self.options, self.threads, self.faststart = dict(options or {}), threads, faststart
        self.frames_written = 0
        self._stack: contextlib.ExitStack | None = None
        self._container: OutputContainer | None = None
        self._stream: VideoStream | None = None

    def __enter__(self) -> VideoWriter:
        if self.encoder == "libsvtav1":
            # SVT-AV1 prints a banner per file on stderr; keep errors only unless the user chose a level.
            os.environ.setdefault("SVT_LOG", "1")
        with contextlib.ExitStack() as stack:
            tmp = stack.enter_context(atomic_path(self.path))
            try:
                container = av.open(
                    str(tmp), mode="w", format="mp4", options={"movflags": "+faststart"} if self.faststart else {}
                )
                stack.callback(container.close)
                stream = cast(VideoStream, container.add_stream(self.encoder, rate=self.fps))
                stream.width, stream.height, stream.pix_fmt = self.width, self.height, self.pix_fmt
                # A 1/fps time base makes pts == frame number, so frame i is at exactly i / fps.
                stream.time_base = Fraction(1, self.fps)
                stream.codec_context.time_base = Fraction(1, self.fps)
                stream.codec_context.bit_rate = 0  # constant quality (crf), no bitrate target
                if self.gop is not None:
                    stream.codec_context.gop_size = self.gop
                options = {"crf": str(self.crf), **self.options}
                if self.preset is not None:
                    options["preset"] = self.preset
                stream.codec_context.options = options
                if self.threads is not None:
                    stream.codec_context.thread_count = self.threads
                stream.codec_context.open()
            except (av.error.FFmpegError, ValueError) as exc:
                raise WriteError(
                    f"cannot start encoding {self.path} with {self.encoder} ({exc}); "
                    "check crf, preset and pix_fmt against what this encoder accepts"
                ) from exc
            self._stack = stack.pop_all()  # keep the temp file and container until __exit__
        self._container, self._stream = container, stream
        return self

    def write(self, frame: np.ndarray) -> None:
        """Encode one RGB frame; it is shown at frames_written / fps seconds."""
        if self._container is None or self._stream is None:
            raise RuntimeError("VideoWriter.write() called outside its `with` block")
        expected = (self.height, self.width, 3)
        if frame.shape != expected or frame.dtype != np.uint8:
            raise ValueError(f"expected an {expected} uint8 RGB frame, got {frame.shape} {frame.dtype}")
        self._encode(av.VideoFrame.from_ndarray(np.ascontiguousarray(frame), format="rgb24"))

    def write_frame(self, frame: av.VideoFrame) -> None:
        """Encode one decoded frame; converted only where its size or pixel format differ from the file's."""
        if frame.width != self.width or frame.height != self.height or frame.format.name != self.pix_fmt:
            frame = frame.reformat(width=self.width, height=self.height, format=self.pix_fmt)
        frame.pict_type = av.video.frame.PictureType.NONE  # the encoder places the keyframes, not the source
        self._encode(frame)

    def _encode(self, video_frame: av.VideoFrame) -> None:
        if self._container is None or self._stream is None:
            raise RuntimeError("VideoWriter.write() called outside its `with` block")
        video_frame.pts = self.frames_written
        video_frame.time_base = self._stream.codec_context.time_base  # 1/fps: pts is the frame number
        try:
            self._container.mux(self._stream.encode(video_frame))
        except av.error.FFmpegError as exc:
            raise WriteError(f"encoding frame {self.frames_written} of {self.path} failed: {exc}") from exc
        self.frames_written += 1

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        container, stream, stack = self._container, self._stream, self._stack
        self._container = self._stream = self._stack = None
        if container is None or stream is None or stack is None:
            return
        if exc is not None:
            stack.__exit__(exc_type, exc, tb)  # closes, removes the temp file; the exception propagates
            return
        with stack:  # renames the finished file into place, or removes it if finishing fails
            self._finish(container, stream)

    def _finish(self, container: OutputContainer, stream: VideoStream) -> None:
        if self.frames_written == 0:
            raise WriteError(f"no frames were written to {self.path}; nothing was saved")
        try:
            container.mux(stream.encode(None))  # drain the frames the encoder still holds
            container.close()
        except av.error.FFmpegError as exc:
            raise WriteError(f"finishing {self.path} failed ({exc}); the previous file is intact") from exc
