"""The `--policy.path` rule (a checkpoint folder, or the `latest` pointer naming one) is defined once and read by
both commands that take a checkpoint: `run` and `serve-policy`."""

from __future__ import annotations

from pathlib import Path

import pytest

from steerable.errors import ConfigError
from steerable.runtime.policy_server import ServedPolicySettings, ServePolicySettings
from steerable.runtime.settings import RunPolicySettings, RunSettings, checkpoint_folder


@pytest.mark.parametrize("settings", [RunPolicySettings, ServedPolicySettings])
def test_both_policy_sections_read_the_path_through_the_one_rule(settings: type[RunPolicySettings]) -> None:
    metadata = settings.model_fields["path"].metadata
    assert [getattr(m, "func", None) for m in metadata] == [checkpoint_folder]


def test_run_and_serve_policy_refuse_a_stray_file_with_the_same_line(tmp_path: Path) -> None:
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(b"")
    messages = []
    for build in (lambda: RunSettings(low_level="policy", policy={"path": str(weights)}),
                  lambda: ServePolicySettings(policy={"path": str(weights)})):
        with pytest.raises(ConfigError) as caught:
            build()
        messages.append(str(caught.value))
    assert messages[0] == messages[1]
    assert messages[0].startswith(f"--policy.path {weights} is a file: pass a checkpoint folder")
