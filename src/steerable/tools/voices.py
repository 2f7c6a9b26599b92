"""The voices `say` speaks with, by name: what `steerable run --tts` accepts and its help lists.

Apart from `steerable.tools.say` (the backends themselves) so that the run settings read the names
without loading the tools, numpy or pyarrow.
"""

from __future__ import annotations

from typing import Literal, get_args

__all__ = ["TTS_BACKENDS", "TTSName"]

TTSName = Literal["text", "espeak", "pocket"]
TTS_BACKENDS: tuple[TTSName, ...] = get_args(TTSName)
