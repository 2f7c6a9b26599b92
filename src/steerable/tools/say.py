"""The `say` tool: speak a short sentence to the operator through a TTS backend.

Backends: `text` (print the words only), `espeak` (the espeak-ng program writes a wav, played when
an audio device exists), `pocket` (pocket-tts, optional extra `tts`, imported on first use).
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
import tempfile
import time
import wave
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from steerable.errors import ConfigError, MissingExtraError
from steerable.language.tools import SAY_TOOL, tool_schema
from steerable.tools.voices import TTS_BACKENDS

__all__ = ["TTS_BACKENDS", "EspeakBackend", "PocketBackend", "SayTool", "Speech", "TextBackend", "make_backend"]

logger = logging.getLogger(__name__)

@dataclass(frozen=True)
class Speech:
    """One utterance: its text, and the wav written for it (None for the text backend)."""

    text: str
    wav: Path | None = None
    seconds: float = 0.0


class Backend(Protocol):
    name: str

    def speak(self, text: str, wav: Path | None) -> Speech: ...


def _wav_seconds(path: Path) -> float:
    with wave.open(str(path), "rb") as f:
        return f.getnframes() / float(f.getframerate())


def _audio_player() -> list[str] | None:
    """A command that plays a wav on this machine's sound card, or None without one."""
    if not Path("/dev/snd").exists() and os.environ.get("PULSE_SERVER") is None:
        return None
    for cmd in (["paplay"], ["aplay", "-q"], ["ffplay", "-nodisp", "-autoexit", "-loglevel", "quiet"]):
        if shutil.which(cmd[0]):
            return cmd
    return None


class TextBackend:
    """No audio: the words are shown by the caller."""

    name = "text"

    def speak(self, text: str, wav: Path | None) -> Speech:
        return Speech(text)


class EspeakBackend:
    """espeak-ng (Debian package `espeak-ng`): writes a wav, then plays it if a sound card exists."""

    name = "espeak"

    def __init__(self, voice: str = "en", words_per_minute: int = 160, play: bool | None = None) -> None:
        exe = shutil.which("espeak-ng") or shutil.which("espeak")
        if exe is None:
            raise ConfigError("the espeak TTS backend needs espeak-ng: apt-get install espeak-ng (or use --tts text)")
        self.exe, self.voice, self.wpm = exe, voice, words_per_minute
        self.player = _audio_player() if play is not False else None

    def speak(self, text: str, wav: Path | None) -> Speech:
        out = wav or Path(tempfile.mkstemp(prefix="say_", suffix=".wav")[1])
        cmd = [self.exe, "-v", self.voice, "-s", str(self.wpm), "-w", str(out), "--", text]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=False)
        if done.returncode != 0 or not out.exists() or out.stat().st_size == 0:
            raise RuntimeError(f"espeak-ng failed ({done.returncode}): {done.stderr.strip()[:200]}")
        if self.player is not None:
            subprocess.Popen([*self.player, str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return Speech(text, out, _wav_seconds(out))


class PocketBackend:
    """pocket-tts (a small CPU TTS model); loaded on first use."""

    name = "pocket"

    def __init__(self, voice: str = "alba") -> None:
        # Checked now, not at the first reply: a run must not start and then go mute mid-session.
        try:
            from pocket_tts import TTSModel
        except ImportError as exc:
            raise MissingExtraError("pocket-tts", "tts") from exc
        self._model_class = TTSModel
        self.voice = voice
        self._model: Any = None
        self._voice_state: Any = None

    def _load(self) -> None:
        if self._model is not None:
            return
        self._model = self._model_class.load_model()
        self._voice_state = self._model.get_state_for_audio_prompt(self.voice)

    def speak(self, text: str, wav: Path | None) -> Speech:
        self._load()
        audio = self._model.generate_audio(self._voice_state, text)
        pcm = np.asarray(audio.detach().cpu() if hasattr(audio, "detach") else audio, dtype=np.float32).reshape(-1)
        rate = int(getattr(self._model, "sample_rate", 24000))
        out = wav or Path(tempfile.mkstemp(prefix="say_", suffix=".wav")[1])
        with wave.open(str(out), "wb") as f:
            f.setnchannels(1)
            f.setsampwidth(2)
            f.setframerate(rate)
            f.writeframes((np.clip(pcm, -1.0, 1.0) * 32767).astype("<i2").tobytes())
        return Speech(text, out, len(pcm) / rate)


def make_backend(name: str, **options: Any) -> Backend:
    if name == "text":
        return TextBackend()
    if name == "espeak":
        return EspeakBackend(**options)
    if name == "pocket":
        return PocketBackend(**options)
    raise ConfigError(f"unknown TTS backend {name!r}: choose one of {', '.join(TTS_BACKENDS)}")


def _snippet(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", text[:32]).strip("_") or "speech"


@dataclass
class SayTool:
    """Speaks `arguments["text"]`; wavs go to `output_dir` (a temp file when None)."""

    backend: Backend = field(default_factory=TextBackend)
    output_dir: Path | None = None
    schema: dict[str, Any] = field(default_factory=lambda: tool_schema("say") or dict(SAY_TOOL))
    on_speech: Callable[[Speech], None] | None = None
    name: str = field(default="say", init=False)

    @classmethod
    def from_options(cls, schema: dict[str, Any], options: Mapping[str, Any]) -> SayTool:
        backend = make_backend(str(options.get("tts", "text")))
        out = options.get("output_dir")
        return cls(backend, Path(out) if out else None, schema, options.get("on_speech"))

    def call(self, arguments: Mapping[str, Any]) -> Speech:
        text = str(arguments["text"]).strip()
        wav = None
        if self.output_dir is not None and self.backend.name != "text":
            self.output_dir.mkdir(parents=True, exist_ok=True)
            wav = self.output_dir / f"say_{int(time.time() * 1000)}_{_snippet(text)}.wav"
        speech = self.backend.speak(text, wav)
        logger.info("say: %s", text)
        if self.on_speech is not None:
            self.on_speech(speech)
        return speech
