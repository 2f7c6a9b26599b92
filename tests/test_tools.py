"""Tools: schema validation before dispatch, refusal of unknown tools, `say` through espeak-ng."""

from __future__ import annotations

import shutil
import sys
import wave
from pathlib import Path

import pytest

from steerable.errors import ConfigError, MissingExtraError
from steerable.language.tools import SAY_TOOL
from steerable.tools import SayTool, ToolRegistry, load_tools, make_backend

WEATHER = {
    "type": "function",
    "function": {
        "name": "weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}


def test_loader_instantiates_declared_tools_and_skips_unimplemented_ones() -> None:
    registry = load_tools({"tools": [SAY_TOOL, WEATHER]}, tts="text")
    assert registry.names == ["say"]
    # No catalog declared: the default catalog (say) is used.
    assert load_tools({}).names == ["say"]


def test_unknown_tool_and_bad_arguments_are_refused_without_running() -> None:
    spoken: list[str] = []
    registry = ToolRegistry([SayTool(on_speech=lambda s: spoken.append(s.text))])
    unknown = registry.dispatch("weather", {"city": "Paris"})
    assert not unknown.ok and "no tool named 'weather'" in unknown.message and "say" in unknown.message
    missing = registry.dispatch("say", {"words": "hi"})
    assert not missing.ok and "'text' is a required property" in missing.message
    wrong_type = registry.dispatch("say", {"text": 3})
    assert not wrong_type.ok and "text" in wrong_type.message
    not_object = registry.dispatch("say", "hello")
    assert not not_object.ok and "JSON object" in not_object.message
    assert spoken == []
    ok = registry.dispatch("say", {"text": "on my way"})
    assert ok.ok and spoken == ["on my way"]


def test_a_failing_tool_is_reported_not_raised() -> None:
    class Broken:
        name = "say"
        schema = SAY_TOOL

        def call(self, arguments: object) -> None:
            raise OSError("sound card unplugged")

    outcome = ToolRegistry([Broken()]).dispatch("say", {"text": "hi"})
    assert not outcome.ok and "sound card unplugged" in outcome.message


def test_say_with_espeak_writes_a_wav_of_plausible_length(tmp_path: Path) -> None:
    assert shutil.which("espeak-ng"), "espeak-ng is missing: apt-get install -y espeak-ng (make test does)"
    registry = load_tools({}, tts="espeak", output_dir=tmp_path)
    short = registry.dispatch("say", {"text": "Okay."})
    long = registry.dispatch("say", {"text": "Okay, I will put the red cube in the right bin instead."})
    assert short.ok and long.ok, (short.message, long.message)
    for outcome in (short, long):
        wav = outcome.value.wav
        assert wav.parent == tmp_path and wav.stat().st_size > 1000
        with wave.open(str(wav)) as f:
            assert f.getnframes() > 0 and f.getframerate() > 8000
    # About 2-3 words per second: a sentence of 12 words lasts seconds, a single word well under two.
    assert 0.2 < short.value.seconds < 2.0
    assert 2.0 < long.value.seconds < 8.0


def test_unknown_tts_backend_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="choose one of text, espeak, pocket"):
        make_backend("festival")


def test_pocket_without_its_extra_is_refused_before_the_run_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pocket_tts", None)  # not installed, whatever this machine has
    with pytest.raises(MissingExtraError, match=r"steerable\[tts\]"):
        load_tools({}, tts="pocket")
