"""What the walks of issue #38 found defined twice on `annotate` and `run`, now defined once: each test pins
the one definition the others read."""

from __future__ import annotations

from typing import Any

import pytest

from steerable.errors import ConfigError
from steerable.runtime.settings import RunSettings
from steerable.tools.voices import TTS_BACKENDS


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


def test_the_environment_state_refusal_is_one_line_for_both_checks() -> None:
    from types import SimpleNamespace
    from typing import get_type_hints

    import numpy as np

    from steerable.control import ENVIRONMENT_STATE_FEATURE, Observation
    from steerable.runtime import policy_adapter
    from steerable.runtime.policy_observation import no_environment_state, policy_observation
    from steerable.runtime.stack import ObservationKind

    keys = ["observation.state", ENVIRONMENT_STATE_FEATURE]
    runner: Any = SimpleNamespace(cfg=SimpleNamespace(read_state_keys=keys, state_keys=keys, locate_key=""))
    with pytest.raises(ConfigError) as at_load:
        policy_adapter._check_observation(runner, "standard")
    with pytest.raises(ConfigError) as at_step:
        policy_observation(Observation(state=np.zeros(3, np.float32)), runner)
    assert str(at_load.value) == str(at_step.value) == str(no_environment_state())
    # `--observation` reaches the adapter as its Literal, not a bare str.
    for function in (policy_adapter.load_low_level, policy_adapter.load_high_level, policy_adapter._check_observation):
        assert get_type_hints(function)["observation"] == ObservationKind


def test_flow_noise_is_checked_by_its_settings_field_only() -> None:
    import inspect

    from steerable.runtime import policy_adapter

    with pytest.raises(ConfigError, match="--policy.flow_noise"):
        RunSettings(policy={"flow_noise": -1})
    assert "flow_noise must be" not in inspect.getsource(policy_adapter)


def test_the_optional_environment_abilities_are_protocols() -> None:
    from steerable.control import ScriptsController, ScriptsPlanner, SeedsForTask
    from steerable.runtime.session import _seed_for
    from steerable.runtime.stack import StackSpec, check_scripted
    from steerable.synthetic import SimEnv

    assert issubclass(SimEnv, ScriptsPlanner) and issubclass(SimEnv, ScriptsController)
    assert issubclass(SimEnv, SeedsForTask)  # declared, not found by name

    class Bare:
        """No scripted doubles, no scene search."""

    env: Any = Bare()
    with pytest.raises(ConfigError, match=r"--low_level scripted: this environment \(Bare\) has no scripted "):
        check_scripted(StackSpec(high_level="none"), env)
    assert _seed_for(env, "put the red cube in the blue bin") == 0
    assert _seed_for(SimEnv(), "put the red cube in the blue bin") == SimEnv.seed_for_task("put the red cube in the "
                                                                                           "blue bin")


def test_every_choice_is_refused_by_one_helper() -> None:
    import inspect

    from steerable.runtime import stack
    from steerable.settings import check_choice
    from steerable.vlm import backends

    assert stack.check_choice is check_choice
    assert "check_choice(" in inspect.getsource(backends.check_backend_name)
    with pytest.raises(ConfigError) as refused:
        backends.check_backend_name("grammar")
    assert str(refused.value) == f"--vlm.backend 'grammar': choose one of {', '.join(backends.backend_names())}"


def test_the_text_policy_takes_the_policys_chat_type() -> None:
    import inspect

    from steerable.runtime.policy_observation import TextPolicy

    # A chat is spelled once (policy.inference.Chat); the runtime's protocol names it, not its shape.
    assert "chats: Sequence[Chat]" in inspect.getsource(TextPolicy.generate)
