"""Which software video encoders and decoders this PyAV build provides, and what a codec name means."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Literal

import av

from steerable.errors import ConfigError

__all__ = ["CodecSupport", "available_codecs", "resolve_encoder"]

# Software implementations only, in order of preference. Hardware encoders (nvenc, vaapi...) are left
# out on purpose: they exist in the build but fail at open time on a machine without the device.
_ENCODERS: dict[str, tuple[str, ...]] = {
    "h264": ("libx264", "libopenh264"),
    "av1": ("libsvtav1", "libaom-av1", "librav1e"),
    "hevc": ("libx265",),
}
# FFmpeg's native "av1" decoder only drives hardware acceleration, so it does not count as support.
_DECODERS: dict[str, tuple[str, ...]] = {
    "h264": ("h264",),
    "av1": ("libdav1d", "libaom-av1"),
    "hevc": ("hevc",),
    "mpeg4": ("mpeg4",),
}


@dataclass(frozen=True)
class CodecSupport:
    """The encoders and decoders present for one codec family, best first (empty: unsupported)."""

    encoders: tuple[str, ...]
    decoders: tuple[str, ...]


def _has(name: str, mode: Literal["r", "w"]) -> bool:
    try:
        av.Codec(name, mode)
    except (ValueError, av.error.FFmpegError):  # PyAV's UnknownCodecError derives from ValueError
        return False
    return True


@functools.cache
def available_codecs() -> dict[str, CodecSupport]:
    """Map each codec family we know ("h264", "av1", "hevc", "mpeg4") to what this build can do."""
    families = sorted(set(_ENCODERS) | set(_DECODERS))
    return {
        family: CodecSupport(
            encoders=tuple(name for name in _ENCODERS.get(family, ()) if _has(name, "w")),
            decoders=tuple(name for name in _DECODERS.get(family, ()) if _has(name, "r")),
        )
        for family in families
    }


def resolve_encoder(codec: str) -> str:
    """Turn a family ("h264", "av1") or an encoder name ("libsvtav1") into an encoder this build has."""
    support = available_codecs()
    if codec in support:
        if support[codec].encoders:
            return support[codec].encoders[0]
        wanted = ", ".join(_ENCODERS.get(codec, ())) or "none known"
        raise ConfigError(
            f"no {codec} encoder in this PyAV build (looked for: {wanted}); "
            f"use another codec, e.g. codec='h264'"
        )
    known = {name for s in support.values() for name in s.encoders}
    if codec in known:
        return codec
    choices = ", ".join(sorted(f for f, s in support.items() if s.encoders) + sorted(known))
    raise ConfigError(f"unknown or unavailable video codec {codec!r}; choose one of: {choices}")
