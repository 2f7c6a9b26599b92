"""steerable inside LeRobot's own `lerobot-rollout`: the real CLI drives steerable's policy on a robot.

The robot is the mock arm plugin (`plugins/lerobot_robot_mockarm`: an SO-101-like arm on a fake
motors bus, in degrees, logging every call); the policy a tiny `steerable_hierarchical` checkpoint
for the arm's six joints and camera, built with LeRobot's config factory and saved by the policy's
`save_pretrained` as LeRobot's trainer saves one (random weights; steerable's normalisation stats in
degrees, so its targets land around the stats' means). Checked, with sync inference and with
LeRobot's real-time chunking (`--inference.type=rtc`, steerable's guided inpainting under it):
the run exits 0, steerable's policy wrote a subtask for the task given, the arm was connected once,
got targets in degrees at the control rate and was let go (with RTC, after LeRobot took it back to
where it started). In process: LeRobot's RTC check accepts the policy, and a guided chunk holds its
executed steps onto LeRobot's leftover, the zero rows LeRobot pads it with ignored.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from lerobot.configs import PreTrainedConfig
from lerobot.configs.types import FeatureType, PolicyFeature
from lerobot.policies import make_pre_post_processors
from lerobot.policies.factory import get_policy_class, make_policy_config
from lerobot.policies.rtc.configuration_rtc import RTCConfig
from lerobot.rollout.inference.rtc import supports_rtc_inference
from lerobot.utils.import_utils import register_third_party_plugins
from robot_helpers import CAMERA, MEAN, NAMES, STD, plugin_site, read_log

from steerable.policy.backbone import build_backbone
from steerable.policy.checkpoint import LoadedPolicy
from steerable.policy.model import HierarchicalPolicy
from steerable.policy.processor import Normalizer, Processor
from steerable.policy.tokenizer import build_tiny_tokenizer
from steerable.recipes import load_recipe

ROLLOUT = Path(sys.executable).parent / "lerobot-rollout"
TASK = "pick up the cube"
START = np.array([50.0 if name == "gripper.pos" else 0.0 for name in NAMES])  # where the arm starts
FPS, SECONDS = 30, 2

register_third_party_plugins()  # what every LeRobot script does first (registers steerable_hierarchical)


def steerable_checkpoint(folder: Path) -> Path:
    """A tiny `steerable_hierarchical` checkpoint for the mock arm's state, camera and action, saved as
    LeRobot's trainer saves a policy (config.json, weights, processor files). Its normalisation stats
    (steerable's, in `stats.json`: the policy normalises itself) are in degrees: state within 20 of
    `MEAN`, actions `MEAN` +- `STD`."""
    h, w = CAMERA
    cfg = make_policy_config(
        "steerable_hierarchical", device="cpu",
        input_features={"observation.state": PolicyFeature(FeatureType.STATE, (6,)),
                        "observation.images.front": PolicyFeature(FeatureType.VISUAL, (3, h, w))},
        output_features={"action": PolicyFeature(FeatureType.ACTION, (6,))},
        cameras=["observation.images.front"], state_key="observation.state", state_dim=6, action_dim=6,
        state_names=list(NAMES), action_names=list(NAMES), action_mode="absolute", motion_input=False,
        tiny_hidden=32, tiny_heads=2, tiny_vision_hidden=16, image_size=16, chunk_size=8, n_action_steps=8,
        expert_hidden=32, expert_heads=2, tiny_vocab_size=320, max_length=96, flow_steps=2)
    settings = cfg.policy_config()
    tokenizer = build_tiny_tokenizer([TASK, "reach the cube", "close the gripper", "lift the cube"],
                                     settings.tiny_vocab_size)
    torch.manual_seed(0)
    backbone, size = build_backbone(settings, len(tokenizer))
    stats = Normalizer([m - 20 for m in MEAN], [m + 20 for m in MEAN], list(MEAN), list(STD))
    recipe = Path(load_recipe("hierarchical").origin).read_text(encoding="utf-8")
    loaded = LoadedPolicy(HierarchicalPolicy(settings, backbone), Processor(settings, tokenizer, stats, size),
                          recipe, folder)
    policy = get_policy_class("steerable_hierarchical")(cfg, loaded=loaded)
    policy.save_pretrained(folder)
    pre, post = make_pre_post_processors(cfg)
    pre.save_pretrained(folder)
    post.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return steerable_checkpoint(tmp_path_factory.mktemp("steerable_mock_arm"))


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return plugin_site(tmp_path_factory.mktemp("plugin"))


def _rollout(site: Path, checkpoint: Path, folder: Path, *extra: str) -> tuple[str, list[dict]]:
    """`lerobot-rollout` on the mock arm (camera 32x24) for `SECONDS`; (its output, the arm's log)."""
    assert ROLLOUT.is_file(), f"{ROLLOUT} is missing: lerobot is not installed in {sys.prefix}"
    log = folder / "arm.log"
    argv = [str(ROLLOUT), "--strategy.type=base", f"--policy.path={checkpoint}", "--robot.type=mock_arm",
            f"--robot.log={log}", f"--robot.calibration_dir={folder / 'calibration'}", "--robot.camera_width=32",
            "--robot.camera_height=24", f"--task={TASK}", f"--duration={SECONDS}", f"--fps={FPS}", *extra]
    env = {**os.environ, "PYTHONPATH": str(site), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    out = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env, cwd=folder,
                         stdin=subprocess.DEVNULL)
    text = out.stdout + out.stderr
    assert out.returncode == 0, f"lerobot-rollout exited {out.returncode}:\n{text[-4000:]}"
    return text, read_log(log)


def _targets(log: list[dict]) -> np.ndarray:
    """The arm's connect ... disconnect, once each; the targets it got, in order (n, 6)."""
    calls = [row["call"] for row in log]
    assert calls[0] == "connect" and calls[-1] == "disconnect", calls[:3] + calls[-3:]
    assert calls.count("connect") == calls.count("disconnect") == 1
    rows = [row for row in log if row["call"] == "send_action"]
    assert all(row["sent"] == row["action"] for row in rows)  # nothing clipped on the way
    return np.array([[row["sent"][n] for n in NAMES] for row in rows])


def _assert_degrees_about_the_means(policy_targets: np.ndarray) -> None:
    """Robot units around the stats' means (a normalised target would sit near 0: 20-50 away)."""
    assert len(policy_targets) and np.isfinite(policy_targets).all()
    mean = policy_targets.mean(0)
    assert np.all(np.abs(mean - np.array(MEAN)) < 2.5 * np.array(STD)), mean
    assert np.all(np.abs(policy_targets - np.array(MEAN)) < 10 * np.array(STD))


def _assert_steerable_wrote_a_subtask(output: str) -> None:
    lines = [line for line in output.splitlines() if "steerable_hierarchical: subtask" in line]
    assert lines and all(line.endswith(f"for task {TASK!r}") for line in lines), output[-3000:]


def test_lerobot_rollout_runs_the_steerable_policy_on_a_robot(site: Path, checkpoint: Path, tmp_path: Path) -> None:
    output, log = _rollout(site, checkpoint, tmp_path, "--return_to_initial_position=false")
    assert "Policy loaded: type=steerable_hierarchical" in output and "SyncInferenceEngine" in output
    _assert_steerable_wrote_a_subtask(output)
    targets = _targets(log)
    # One target a control tick, for the whole duration (a loaded 2-core machine may lose some ticks).
    assert FPS * SECONDS * 0.5 <= len(targets) <= FPS * SECONDS + 2, len(targets)
    _assert_degrees_about_the_means(targets)
    # The policy's chunks: each a fresh flow sample, so consecutive targets differ.
    assert np.abs(np.diff(targets, axis=0)).max(1).min() > 1e-4


def test_lerobot_rollout_with_rtc_continues_chunks_and_returns_the_arm(site: Path, checkpoint: Path,
                                                                       tmp_path: Path) -> None:
    # With the policy's 2 flow steps a guidance weight over 2 overshoots the leftover (the step times the
    # weight must stay <= 1); LeRobot's default, 10, suits 10 steps.
    output, log = _rollout(site, checkpoint, tmp_path, "--inference.type=rtc", "--inference.rtc.execution_horizon=8",
                           "--inference.rtc.max_guidance_weight=2")
    assert "RTC inference thread started" in output
    assert "RTC inference error" not in output and "Traceback" not in output, output[-3000:]
    _assert_steerable_wrote_a_subtask(output)
    targets = _targets(log)
    # LeRobot takes the arm back to where it started (a straight path) before letting it go.
    np.testing.assert_allclose(targets[-1], START, atol=1e-3)
    steps = np.diff(targets, axis=0)
    equal = next(i for i, step in enumerate(steps[::-1]) if not np.allclose(step, steps[-1], atol=1e-3))
    policy_targets = targets[: len(targets) - equal - 1]
    assert equal >= 10, equal  # LeRobot's way back is many small steps, not a jump
    assert len(policy_targets) >= FPS * SECONDS * 0.3, (len(policy_targets), len(targets))
    _assert_degrees_about_the_means(policy_targets)


def test_rtc_guides_a_chunk_onto_lerobots_leftover_and_ignores_its_padding(checkpoint: Path) -> None:
    """As `lerobot-rollout` loads the policy for RTC: LeRobot's own check, its settings, its call."""
    cfg = PreTrainedConfig.from_pretrained(checkpoint)
    cfg.pretrained_path = checkpoint
    policy = get_policy_class(cfg.type).from_pretrained(checkpoint, config=cfg)
    assert supports_rtc_inference(policy)
    policy.config.rtc_config = RTCConfig(execution_horizon=6, max_guidance_weight=2.0)
    policy.init_rtc_processor()
    pre, _ = make_pre_post_processors(cfg, pretrained_path=str(checkpoint))
    h, w = CAMERA
    batch = pre({"observation.state": torch.tensor(MEAN), "observation.images.front": torch.rand(3, h, w),
                 "task": TASK})
    left = torch.tensor([[40.0, -30.0, 50.0, 20.0, 10.0, 60.0]] * 3)  # 2 to run during the inference, 1 after
    padded = torch.cat([left, torch.zeros(3, 6)])  # LeRobot pads it with zeros to the execution horizon

    def chunk(**rtc: object) -> torch.Tensor:
        policy.runner.generator.manual_seed(0)  # the same noise for each
        out = policy.predict_action_chunk(batch, **rtc)
        assert out.shape == (1, 8, 6)
        return out[0]

    # From a sample (flow_noise 1) and from the prior's mean (0, the default): the guidance starts a
    # step further from the leftover in the second case, so its bound is a little looser.
    for noise, bound in ((1.0, 0.25), (0.0, 0.3)):
        policy.runner.model.cfg.flow_noise = noise
        plain = chunk()
        guided = chunk(inference_delay=2, prev_chunk_left_over=padded)
        torch.testing.assert_close(chunk(inference_delay=2, prev_chunk_left_over=left), guided)  # padding: not actions
        far, near = ((c[:2] - left[:2]).abs().max().item() for c in (plain, guided))
        assert near < bound * far and near < 3.0, (noise, near, far)  # the executed steps held onto the leftover
        torch.testing.assert_close(chunk(inference_delay=0, prev_chunk_left_over=torch.zeros(6, 6)), plain)
