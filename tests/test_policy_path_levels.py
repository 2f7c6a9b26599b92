"""`--policy.path` is the policy at each level the user did not name when no level names it (`steerable run`),
as `--policy.server` is the low level; naming both levels, neither the policy, is refused in one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from steerable.cli.main import main
from steerable.errors import ConfigError
from steerable.runtime.settings import RunSettings


@pytest.mark.parametrize(("levels", "expected"), [
    ({}, ("policy", "policy")),  # the checkpoint is the hierarchical policy
    ({"high_level": "vlm", "vlm": {"base_url": "http://h:1/v1", "model_id": "m"}}, ("vlm", "policy")),
    ({"high_level": "none"}, ("none", "policy")),
    ({"low_level": "scripted"}, ("policy", "scripted")),
    ({"high_level": "scripted", "low_level": "policy"}, ("scripted", "policy")),
    # a level named the policy keeps the other at its default, as before the path filled levels
    ({"low_level": "policy"}, ("scripted", "policy")),
    ({"high_level": "policy"}, ("policy", "scripted")),
])
def test_the_policy_path_fills_the_levels_not_named(tmp_path: Path, levels: dict[str, object],
                                                    expected: tuple[str, str]) -> None:
    settings = RunSettings.model_validate({**levels, "policy": {"path": str(tmp_path)}})
    spec = settings.stack()
    assert (spec.high_level, spec.low_level) == expected
    assert spec.policy_path == str(tmp_path)


def test_a_policy_server_is_the_low_level_and_the_high_level_keeps_its_default(tmp_path: Path) -> None:
    spec = RunSettings.model_validate({"policy": {"path": str(tmp_path), "server": "h:1"}}).stack()
    assert (spec.high_level, spec.low_level, spec.policy_server) == ("scripted", "policy", "h:1")
    both = {"high_level": "policy", "policy": {"path": str(tmp_path), "server": "h:1"}}
    spec = RunSettings.model_validate(both).stack()
    assert (spec.high_level, spec.low_level) == ("policy", "policy")  # the high level runs here, the low level there


def test_both_levels_named_without_the_policy_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ConfigError, match="--policy.path runs a trained policy"):
        RunSettings(high_level="scripted", low_level="scripted", policy={"path": "x"})
    argv = ["run", "--high_level", "scripted", "--low_level", "scripted", "--policy.path", str(tmp_path)]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["steerable: error: --policy.path runs a trained policy at --high_level or --low_level policy; it "
                   "does not combine with --high_level scripted --low_level scripted"]
