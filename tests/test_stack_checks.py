"""`StackSpec`'s checks of a run's models: the VLM backend is the registry's decision (vlm.backends), and the
policy-path rule is written once, in the stack, for the settings and for stacks built in code."""

from __future__ import annotations

from pathlib import Path

import pytest

from steerable.cli.main import main
from steerable.errors import ConfigError
from steerable.runtime.settings import RunSettings
from steerable.runtime.stack import StackSpec
from steerable.vlm.config import VLMConfig


def test_a_vlm_run_in_this_process_needs_no_url() -> None:
    spec = StackSpec(high_level="vlm", vlm=VLMConfig(backend="transformers", model_id="org/model"))
    assert spec.vlm is not None and spec.vlm.backend == "transformers"
    settings = RunSettings.model_validate(
        {"high_level": "vlm", "vlm": {"backend": "transformers", "model_id": "org/model"}})
    assert settings.stack().vlm == spec.vlm


def test_no_backend_and_a_server_backend_are_refused_in_one_line(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ConfigError, match="--high_level vlm needs --vlm.base_url"):
        StackSpec(high_level="vlm", vlm=VLMConfig())  # auto: no URL, no model id for vLLM
    with pytest.raises(ConfigError, match="--vlm.backend vllm starts servers, which `run` does not"):
        StackSpec(high_level="vlm", vlm=VLMConfig(backend="vllm", model_id="m"))
    # An openai backend without its URL: the backend's own line, at build time, status 2.
    commands = tmp_path / "commands.txt"
    commands.write_text("/task pick up the red cube\n")
    assert main(["run", "--high_level", "vlm", "--vlm.backend", "openai", "--commands", str(commands)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["steerable: error: --vlm.base_url is required for the openai backend (e.g. http://localhost:8000/v1)"]


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"high_level": "policy"}, "--high_level policy needs --policy.path CHECKPOINT"),
    ({"low_level": "policy"}, "--low_level policy needs --policy.path CHECKPOINT (or --policy.server HOST:PORT)"),
    ({"high_level": "policy", "low_level": "policy", "policy_server": "h:1"},
     "--high_level policy needs --policy.path CHECKPOINT too: it runs on this machine (the policy server serves "
     "only the low level)"),
])
def test_the_policy_path_rule_reads_the_same_from_code_and_flags(kwargs: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as from_code:
        StackSpec(**kwargs)  # type: ignore[arg-type]
    assert str(from_code.value) == message
    flags = {"high_level": kwargs.get("high_level", "scripted"), "low_level": kwargs.get("low_level", "scripted")}
    if "policy_server" in kwargs:
        flags = {"high_level": "policy", "policy": {"server": kwargs["policy_server"]}}  # type: ignore[dict-item]
    with pytest.raises(ConfigError) as from_flags:
        RunSettings(**flags)
    assert str(from_flags.value) == message
