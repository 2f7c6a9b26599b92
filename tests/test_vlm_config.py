"""One `VLMConfig` for `annotate` and `run`: run's spellings are aliases, the backend is chosen in one registry."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from pydantic import Field

from steerable.cli.flags import flag_aliases, parse_config
from steerable.errors import ConfigError, VLMError
from steerable.settings import Settings
from steerable.testing import ScriptedVLM
from steerable.vlm import backends
from steerable.vlm.backends import VLMBackend, resolve_backend
from steerable.vlm.config import VLMConfig
from steerable.vlm.factory import make_vlm, open_vlm


class _Command(Settings):
    """A command with a `--vlm.*` section, as `annotate` and `run` have."""

    vlm: VLMConfig = Field(default_factory=VLMConfig)


def test_runs_spellings_are_aliases_of_the_one_config() -> None:
    config = VLMConfig(timeout_s=5, base_url="http://127.0.0.1:9/v1/")
    assert config.request_timeout_s == 5
    assert config.base_url == ["http://127.0.0.1:9/v1"]
    assert VLMConfig(request_timeout_s=7).request_timeout_s == 7


def test_the_aliases_are_flags() -> None:
    assert flag_aliases(_Command)["vlm.timeout_s"] == "vlm.request_timeout_s"
    cmd = parse_config(_Command, ["--vlm.timeout_s", "2.5", "--vlm.base_url", "http://a:1/v1,http://b:2/v1"])
    assert cmd.vlm.request_timeout_s == 2.5
    assert cmd.vlm.base_url == ["http://a:1/v1", "http://b:2/v1"]


class _Served:
    """A stand-in for what a backend serves from (vLLM replicas): records that it ran."""

    def __init__(self, log: list[str]) -> None:
        self.log = log

    async def __aenter__(self) -> _Served:
        self.log.append("serve")
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.log.append("stopped")


class _Refusing(ScriptedVLM):
    async def check(self) -> None:
        raise VLMError("toy backend: not here")


def _toy(monkeypatch: pytest.MonkeyPatch, log: list[str], *, picks: bool = True) -> None:
    """Register a backend the way a user would: one entry in the registry."""

    def picked(config: VLMConfig) -> bool:
        log.append("picks")
        return picks

    backend = VLMBackend(client=lambda config: _Refusing(lambda *a: {}), serve=lambda config: _Served(log),
                         picks=picked)
    monkeypatch.setattr(backends, "BACKENDS", {"toy": backend, **backends.BACKENDS})


def test_a_backend_is_one_registry_entry(monkeypatch: pytest.MonkeyPatch) -> None:
    log: list[str] = []
    _toy(monkeypatch, log)
    assert VLMConfig(backend="toy").backend == "toy"
    assert resolve_backend(VLMConfig()) == "toy"  # `auto` tries the entries in order
    assert isinstance(make_vlm(VLMConfig(backend="toy")), ScriptedVLM)

    async def opened() -> None:
        async with open_vlm(VLMConfig(backend="toy")):
            pass

    with pytest.raises(VLMError, match="toy backend"):
        asyncio.run(opened())
    assert log == ["picks", "serve", "stopped"]  # served before the check, stopped after it failed


def test_an_unknown_backend_is_one_line_naming_the_choices() -> None:
    from steerable.vlm.backends import get_backend

    line = "--vlm.backend 'grammar': choose one of auto, openai, vllm, transformers"
    with pytest.raises(ConfigError) as from_settings:
        VLMConfig(backend="grammar")
    with pytest.raises(ConfigError) as from_registry:
        get_backend("grammar")
    assert str(from_settings.value) == str(from_registry.value) == line  # one wording, the registry's


def test_annotate_decides_the_backend_once(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from annotate_helpers import make_synthetic
    from steerable.annotate.config import AnnotateConfig
    from steerable.annotate.run import annotate

    root = make_synthetic(tmp_path / "ds", episodes=1)
    log: list[str] = []
    _toy(monkeypatch, log)
    with pytest.raises(VLMError, match="toy backend"):
        annotate(AnnotateConfig(root=root))
    assert log.count("picks") == 1  # not again in the executor, open_vlm and make_vlm
