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


def test_the_latest_pointer_has_one_reader(tmp_path: Path) -> None:
    """`steerable run`'s settings and the loader read `checkpoints/latest` alike: a pointer out of its folder is
    no checkpoint to either (the loader followed it before)."""
    from steerable.policy.checkpoint import latest_checkpoint

    out = tmp_path / "train"
    (out / "checkpoints").mkdir(parents=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "model.safetensors").write_bytes(b"")
    pointer = out / "checkpoints" / "latest"
    pointer.write_text("../../elsewhere\n")
    assert latest_checkpoint(out) is None
    with pytest.raises(ConfigError, match="is a file: pass a checkpoint folder"):
        checkpoint_folder(str(pointer))
    (out / "checkpoints" / "step_00000002").mkdir()
    (out / "checkpoints" / "step_00000002" / "model.safetensors").write_bytes(b"")
    pointer.write_text("step_00000002\n")
    assert latest_checkpoint(out) == out / "checkpoints" / "step_00000002"
    assert checkpoint_folder(str(pointer)) == str(out / "checkpoints" / "step_00000002")


def test_a_run_killed_before_its_first_pointer_write_resumes_from_its_newest_folder(tmp_path: Path) -> None:
    """A step folder is whole once it exists (the folder commit); a kill between that commit and the `latest`
    write left a checkpoint the next run must find (CI once saw a resumed run start over from step 0)."""
    from steerable.policy.checkpoint import latest_checkpoint

    out = tmp_path / "train"
    for step in (3, 6):
        (out / "checkpoints" / f"step_{step:08d}").mkdir(parents=True)
        (out / "checkpoints" / f"step_{step:08d}" / "model.safetensors").write_bytes(b"")
    (out / "checkpoints" / ".step_00000009.steerable-tmp").mkdir()  # a save still in flight: not a checkpoint
    assert latest_checkpoint(out) == out / "checkpoints" / "step_00000006"
    (out / "checkpoints" / "latest").write_text("step_00000003\n")  # a pointer set back by hand is obeyed
    assert latest_checkpoint(out) == out / "checkpoints" / "step_00000003"


def test_the_run_settings_import_neither_torch_nor_pyarrow() -> None:
    import subprocess
    import sys

    code = "import sys, steerable.runtime.settings; print(*(m in sys.modules for m in ('torch', 'pyarrow')))"
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert ran.stdout.strip() == "False False"  # nor pyarrow: the voices' names come from tools/voices.py
