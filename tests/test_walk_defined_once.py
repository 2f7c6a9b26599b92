"""What the walks of issue #38 found defined twice on `annotate` and `run`, now defined once: each test pins
the one definition the others read."""

from __future__ import annotations

import pytest

from steerable.errors import ConfigError
from steerable.runtime.settings import RunSettings
from steerable.tools.say import TTS_BACKENDS


def test_the_tts_choices_are_the_say_tools() -> None:
    with pytest.raises(ConfigError) as refused:
        RunSettings(tts="festival")
    assert str(refused.value) == f"--tts 'festival': choose one of {', '.join(TTS_BACKENDS)}"
    assert RunSettings.model_fields["tts"].description == f"voice of `say`: {' | '.join(TTS_BACKENDS)}"


def test_the_command_class_variables_are_declared_on_settings() -> None:
    import inspect

    import steerable.cli.annotate
    import steerable.cli.flags
    from steerable.annotate.config import AnnotateConfig
    from steerable.settings import Settings

    assert {"positional", "pass_through"} <= Settings.__class_vars__
    assert (Settings.positional, Settings.pass_through) == ((), {})
    assert issubclass(AnnotateConfig, Settings) and AnnotateConfig.positional == ("dataset",)
    # Read as attributes: a default spelled at the reader would hide a misspelt declaration.
    assert "getattr(model" not in inspect.getsource(steerable.cli.flags)
    assert "getattr(args" not in inspect.getsource(steerable.cli.annotate)
