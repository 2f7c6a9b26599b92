"""One `VLMConfig` for `annotate` and `run`: run's spellings are aliases, the backend is chosen in one registry."""

from __future__ import annotations

from pydantic import Field

from steerable.cli.flags import flag_aliases, parse_config
from steerable.settings import Settings
from steerable.vlm.config import VLMConfig


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
