"""The dataset's one gateway to PyAV: decode frames at times, probe files, encode mp4s, list codecs."""

from __future__ import annotations

from steerable.dataset.video_codecs import CodecSupport, available_codecs
from steerable.dataset.video_decode import VideoInfo, decode_frames, probe_video
from steerable.dataset.video_encode import VideoWriter

__all__ = ["CodecSupport", "VideoInfo", "VideoWriter", "available_codecs", "decode_frames", "probe_video"]
