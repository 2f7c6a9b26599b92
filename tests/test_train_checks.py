"""`steerable train` checks what it is given before the first step, and stops when it learns nothing
(#34, items 2, 3, 4 and 10): a dataset whose features are `state` / `actions`, one without language,
one without its videos, a step that trains nothing, and a full disk at a checkpoint."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch
import torch.nn.functional as F

from policy_helpers import TINY, TINY_FLAGS, one_thread  # noqa: F401  (autouse fixture)
from steerable.cli.main import main
from steerable.dataset import open_dataset
from steerable.errors import ConfigError
from steerable.policy.loss_checks import QUIET_SAMPLES, LossChecks
from steerable.synthetic import generate_synthetic

# What a real dataset of issue 34 calls its features (LeRobot's recorder: observation.state, action).
RENAMED = {"observation.state": "state", "action": "actions"}
NAMED = ("--policy.state_key", "state", "--policy.action_key", "actions")  # as the user passed them
ACTIONS_ONLY = "messages:\n  - {role: user, content: \"${task}\", stream: low_level}\n"


def _rename_features(root: Path) -> None:
    """Rename the state and action features of the dataset at `root` everywhere they are named."""
    for path in sorted((root / "data").rglob("*.parquet")):
        source = pq.ParquetFile(path)
        groups = [source.read_row_group(i) for i in range(source.num_row_groups)]  # one per episode: kept
        groups = [g.rename_columns([RENAMED.get(c, c) for c in g.column_names]).replace_schema_metadata(None)
                  for g in groups]
        with pq.ParquetWriter(path, groups[0].schema) as writer:
            for group in groups:
                writer.write_table(group)
    for name in ("info.json", "stats.json"):
        meta = root / "meta" / name
        data = json.loads(meta.read_text())
        if name == "info.json":
            data["features"] = {RENAMED.get(k, k): v for k, v in data["features"].items()}
        else:
            data = {RENAMED.get(k, k): v for k, v in data.items()}
        meta.write_text(json.dumps(data, indent=4))


@pytest.fixture(scope="module")
def renamed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three easy synthetic episodes with oracle language, state and action named `state` and `actions`."""
    root = tmp_path_factory.mktemp("renamed") / "ds"
    generate_synthetic(root, episodes=3, cameras=("top",), difficulty="easy", with_language=True, seed=0)
    _rename_features(root)
    return root


@pytest.fixture(scope="module")
def no_language(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("plain") / "ds"
    generate_synthetic(root, episodes=2, cameras=("top",), difficulty="easy", seed=0)
    return root


def _train(dataset: Path, out: Path, *extra: str) -> int:
    return main(["train", "--dataset", str(dataset), "--output_dir", str(out), "--batch_size", "4",
                 "--action_batch_size", "4", "--eval_text_cases", "2", "--eval_batches", "1", "--no_progress",
                 *TINY_FLAGS, *extra])


def _one_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("steerable: error: ") and "Traceback" not in err[0], err
    return err[0]


# --- item 2: the action feature named `actions` --------------------------------------------------------------


def test_actions_named_actions_train_a_flow_loss(renamed: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    assert _train(renamed, out, *NAMED, "--steps", "3", "--log_every", "1", "--eval_every", "3") == 0
    logs = [json.loads(line) for line in (out / "logs.jsonl").read_text().splitlines()]
    steps = [r for r in logs if "flow_loss" in r]
    assert len(steps) == 3 and all(np.isfinite(r["flow_loss"]) and r["flow_loss"] > 0.1 for r in steps), steps
    held = [r for r in logs if r.get("eval")]
    assert held and np.isfinite(held[-1]["eval_flow_loss"]) and held[-1]["eval_flow_loss"] > 0, held


def test_the_state_and_action_features_are_picked_by_name_as_annotate_does(renamed: Path, lingzu: Path) -> None:
    from steerable.policy.setup import dataset_policy_config

    for root, cameras in ((renamed, ["observation.images.top"]), (lingzu, ["image"])):
        cfg = dataset_policy_config(open_dataset(root), dict(TINY))
        assert (cfg.state_key, cfg.action_key, cfg.cameras) == ("state", "actions", cameras)
    odd = SimpleNamespace(features={"joints": {"dtype": "float32", "shape": [3]}}, camera_keys=[])
    with pytest.raises(ConfigError, match=r"no state feature named observation\.state or state .*joints.*"
                                          r"pass --policy\.state_key NAME"):
        dataset_policy_config(odd, {})  # type: ignore[arg-type]
    odd.features["state"] = odd.features["joints"]
    with pytest.raises(ConfigError, match=r"no action feature named action or actions.*pass --policy\.action_key"):
        dataset_policy_config(odd, {})  # type: ignore[arg-type]


def test_a_batch_that_reaches_the_model_without_its_actions_stops_the_run(
    renamed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from steerable.policy.processor import Processor

    prepare = Processor.training_batch

    def without_actions(self: Processor, batch: Any, device: Any = "cpu", **options: Any) -> dict[str, Any]:
        return {k: v for k, v in prepare(self, batch, device, **options).items()
                if k not in ("actions", "action_mask")}

    monkeypatch.setattr(Processor, "training_batch", without_actions)  # the old clash, forced
    out = tmp_path / "run"
    assert _train(renamed, out, "--steps", "2", "--eval_every", "100") == 2
    line = _one_line(capsys)
    assert "asked for actions and none carried an action chunk" in line and "flow loss is exactly 0" in line
    assert not (out / "checkpoints").exists()


def test_loss_checks_refuse_nothing_learned_and_losses_that_are_not_numbers() -> None:
    def out(loss: float = 1.0, text: int = 0, actions: int = 0) -> dict[str, Any]:
        return {"loss": torch.tensor(loss), "text_loss": torch.tensor(0.0), "flow_loss": torch.tensor(loss),
                "text_tokens": torch.tensor(text), "action_values": torch.tensor(actions)}

    checks = LossChecks(teaches_text=False)
    checks.step(1, out(actions=8), 8, 8, last=False)
    with pytest.raises(ConfigError, match="step 2: the training loss is nan"):
        checks.step(2, out(loss=float("nan"), actions=8), 8, 8, last=False)
    empty = LossChecks(teaches_text=True)  # an empty batch after another: samples that train nothing
    with pytest.raises(ConfigError, match=f"the last {QUIET_SAMPLES} samples trained nothing"):
        for step in range(1, QUIET_SAMPLES + 1):
            empty.step(step, out(loss=0.0), 1, 0, last=False)
    short = LossChecks(teaches_text=False)  # a run too short for the window: checked at its end
    short.step(1, out(loss=0.0, text=5), 4, 2, last=False)
    with pytest.raises(ConfigError, match="4 samples asked for actions and none carried"):
        short.step(2, out(loss=0.0, text=5), 4, 2, last=True)
    with pytest.raises(ConfigError, match="held-out flow loss is nan"):
        checks.heldout({"step": 2, "eval": True, "eval_text_loss": float("nan"), "eval_flow_loss": float("nan")})
    LossChecks(teaches_text=False).heldout({"step": 1, "eval_flow_loss": float("nan")})  # nothing trained: no claim


# --- item 3: a recipe with nothing to teach on the dataset ----------------------------------------------------


def test_a_recipe_that_needs_language_on_a_dataset_without_is_refused_before_training(
    no_language: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    assert _train(no_language, out, "--recipe", "hierarchical", "--steps", "2") == 2
    line = _one_line(capsys)
    assert "has no language rows for recipe 'hierarchical'" in line and "annotate it first" in line
    assert "a --recipe that needs none" in line and not (out / "checkpoints").exists()
    recipe = tmp_path / "actions.yaml"
    recipe.write_text(ACTIONS_ONLY)
    assert _train(no_language, out, "--recipe", str(recipe), "--steps", "2", "--eval_every", "2") == 0


def test_a_recipe_that_renders_no_target_on_the_dataset_is_refused(
    renamed: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    recipe = tmp_path / "motion_target.yaml"  # the oracle language has no motion rows
    recipe.write_text("bindings:\n  moving: active_at(t, style=motion)\nmessages:\n"
                      "  - {role: user, content: \"${task}\", stream: high_level}\n"
                      "  - {role: assistant, content: \"${moving}\", stream: high_level, target: true, "
                      "if_present: moving}\n")
    out = tmp_path / "run"
    assert _train(renamed, out, "--recipe", str(recipe), "--steps", "2", *NAMED) == 2
    line = _one_line(capsys)
    assert f"recipe {str(recipe)!r} renders no sample with a target" in line and "training frames" in line
    assert not (out / "checkpoints").exists()


# --- item 4: the dataset checked before the first step ---------------------------------------------------------


def test_missing_videos_are_named_before_the_first_step(so101: Path, lingzu: Path, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    recipe = tmp_path / "actions.yaml"
    recipe.write_text(ACTIONS_ONLY)
    assert _train(so101, tmp_path / "a", "--recipe", str(recipe), "--steps", "2") == 2
    line = _one_line(capsys)
    assert "camera 'observation.images.front' has no video file for episode(s) 0-3" in line
    assert "restore the video files" in line and "--policy.cameras none" in line
    partial = tmp_path / "lingzu"
    shutil.copytree(lingzu, partial)
    ds = open_dataset(partial)
    ds.video_path("image", ds.episode(1)).unlink()
    assert _train(partial, tmp_path / "b", "--recipe", str(recipe), "--steps", "2", "--eval_fraction", "0") == 2
    line = _one_line(capsys)
    assert "camera 'image' has no video file for episode(s) 1" in line and "--episodes 0,2-3" in line
    assert not (tmp_path / "a" / "checkpoints").exists() and not (tmp_path / "b" / "checkpoints").exists()


def test_frames_are_resized_one_by_one_to_the_same_pixels(renamed: Path) -> None:
    from steerable.train.images import resized_frames

    ds = open_dataset(renamed)
    times = [float(t) for t in ds.episode_timestamps(0)][:40]
    whole = torch.from_numpy(np.stack(ds.decode_frames(0, "observation.images.top", times))).permute(0, 3, 1, 2)
    before = F.interpolate(whole.float(), size=(16, 16), mode="bilinear", antialias=True)  # the old way
    expected = before.round().clamp(0, 255).to(torch.uint8).permute(0, 2, 3, 1)
    got = resized_frames(ds, 0, "observation.images.top", times, 16)
    assert got.dtype == torch.uint8 and torch.equal(got, expected)


# --- item 10: a full disk at a checkpoint ----------------------------------------------------------------------


def test_a_full_disk_at_a_checkpoint_is_one_line_and_keeps_the_last_one(
    renamed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import safetensors.torch
    from safetensors import SafetensorError

    from steerable.policy.checkpoint import load_policy

    real, calls = safetensors.torch.save_model, []

    def full_disk(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) > 1:  # what safetensors raises on ENOSPC (checked on a 64 KB tmpfs)
            raise SafetensorError("Error while serializing: I/O error: No space left on device (os error 28)")
        return real(*args, **kwargs)

    monkeypatch.setattr(safetensors.torch, "save_model", full_disk)
    out = tmp_path / "run"
    recipe = tmp_path / "actions.yaml"
    recipe.write_text(ACTIONS_ONLY)
    assert _train(renamed, out, "--recipe", str(recipe), "--steps", "4", "--save_every", "2",
                  "--eval_every", "100", *NAMED) == 2
    line = _one_line(capsys)
    assert f"could not save the step 4 checkpoint in {out}: no space left on the device" in line
    assert "checkpoints/latest still names step_00000002, intact" in line
    assert (out / "checkpoints" / "latest").read_text().strip() == "step_00000002"
    assert load_policy(out).path == out / "checkpoints" / "step_00000002"
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["latest", "step_00000002"]
