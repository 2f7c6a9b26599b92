"""Meta-World (#36): `steerable make-dataset metaworld` records the package's own scripted policies with the
features LeRobot's Meta-World env gives a policy, a tiny steerable policy trains on them, and
`steerable run --env lerobot --env.type=metaworld` evaluates it. Rendered on the CPU with MuJoCo's OSMesa
back end (`make test` installs Debian's libosmesa6); the whole file stays under a minute."""

from __future__ import annotations

import os

os.environ.setdefault("MUJOCO_GL", "osmesa")  # before anything imports mujoco: no GPU, no display
os.environ.setdefault("PYOPENGL_PLATFORM", "osmesa")

import json  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
import pytest  # noqa: E402
from cli_helpers import FLAGS  # noqa: E402
from lerobot.envs.configs import MetaworldEnv as MetaworldEnvConfig  # noqa: E402
from lerobot.envs.metaworld import TASK_DESCRIPTIONS, MetaworldEnv  # noqa: E402

from steerable.cli.main import main  # noqa: E402
from steerable.policy.checkpoint import latest_checkpoint  # noqa: E402
from steerable.synthetic.metaworld import PHASE_TEXTS, BranchTracer  # noqa: E402
from steerable.synthetic.metaworld.record import MetaWorldScene, _import_metaworld  # noqa: E402
from steerable.synthetic.metaworld.tasks import load_tasks  # noqa: E402

TASK = "pick-place-v3"  # four named phases in about 55 steps


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("metaworld")


@pytest.fixture(scope="module")
def recorded(work: Path) -> Path:
    out = work / "data"
    assert main(["make-dataset", "metaworld", "--tasks", TASK, "--episodes", "1", "--image_size", "32",
                 "--out", str(out)]) == 0
    return out


def test_the_recording_has_lerobots_metaworld_features_task_and_phases(recorded: Path) -> None:
    info = json.loads((recorded / "meta" / "info.json").read_text())
    config = MetaworldEnvConfig(task=TASK)
    assert info["fps"] == config.fps and info["robot_type"] == "metaworld"
    # LeRobot's env hands a policy `agent_pos` as observation.state and `pixels` as observation.image.
    assert {config.features_map["agent_pos"], config.features_map["top"], "action"} == {
        k for k in info["features"] if k.startswith(("observation", "action"))}
    assert info["features"]["observation.state"]["shape"] == list(config.features["agent_pos"].shape)
    assert info["features"]["action"]["shape"] == list(config.features["action"].shape)
    assert info["features"]["observation.image"]["shape"] == [32, 32, 3]
    frames = pq.read_table(recorded / "data" / "chunk-000" / "file-000.parquet").to_pylist()
    tasks = pq.read_table(recorded / "meta" / "tasks.parquet").to_pylist()
    assert [t.get("task", t.get("__index_level_0__")) for t in tasks] == [TASK_DESCRIPTIONS[TASK]]
    actions = np.array([f["action"] for f in frames])
    assert 20 < len(frames) < 500 and np.all(np.abs(actions) <= 1.0)
    rows = frames[0]["language_persistent"]
    subtasks = [r["content"] for r in sorted(rows, key=lambda r: r["timestamp"]) if r["style"] == "subtask"]
    assert subtasks == list(PHASE_TEXTS[TASK])  # above, down, grasp, carry: each phase once, in order
    assert {r["style"] for r in rows} == {"subtask", "plan", "memory"}


def test_the_recorders_scene_is_lerobots_env_frame_for_frame() -> None:
    metaworld, _ = _import_metaworld()
    ours, theirs = MetaWorldScene(metaworld, "push-v3", 480), MetaworldEnv(task="push-v3", obs_type="pixels_agent_pos")
    try:
        observation, _ = theirs.reset(seed=5)
        state = ours.reset(5)
        assert np.array_equal(ours.render(), observation["pixels"])  # camera, its position, right side up
        assert np.allclose(state[:4], observation["agent_pos"])
    finally:
        ours.close()
        theirs.close()


def test_every_named_task_has_as_many_phases_as_its_policy_has_branches() -> None:
    _, policies = _import_metaworld()
    table = load_tasks()
    for task, texts in PHASE_TEXTS.items():
        assert BranchTracer(getattr(policies, table.policies[task])()).branches == len(texts), task


def test_a_policy_trained_on_it_runs_in_lerobots_metaworld_env(recorded: Path, work: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    out = work / "train"
    assert main(["train", "--dataset", str(recorded), "--output_dir", str(out), "--steps", "2", "--batch_size", "4",
                 "--eval_every", "100", "--save_every", "2", "--eval_fraction", "0", "--progress", "false",
                 *FLAGS]) == 0
    checkpoint = latest_checkpoint(out)
    assert checkpoint is not None
    capsys.readouterr()
    # A policy trained on Meta-World has no synthetic task mix: the env gets no --env.difficulty.
    code = main(["run", "--env", "lerobot", "--env.type=metaworld", f"--env.task={TASK}", "--high_level", "policy",
                 "--low_level", "policy", "--policy.path", str(checkpoint), "--eval_episodes", "1", "--workers", "1",
                 "--max_seconds", "0.1", "--ctrl_hz", "80", "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err[-2000:]
    report = json.loads(captured.out.strip().splitlines()[-1])
    assert report["episodes"] == 1 and report["difficulty"] is None and 0.0 <= report["success_rate"] <= 1.0
    assert set(report["by_kind"]) == {TASK} and 0 < report["mean_sim_seconds"] <= 0.1 + 1e-6


def test_a_missing_metaworld_or_a_misspelt_task_is_one_line(work: Path, monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["make-dataset", "metaworld", "--tasks", "pick-plase-v3", "--out", str(work / "typo")]) == 2
    assert "did you mean pick-place-v3?" in capsys.readouterr().err
    monkeypatch.setitem(sys.modules, "metaworld", None)  # import metaworld now fails, as when not installed
    assert main(["make-dataset", "metaworld", "--tasks", TASK, "--out", str(work / "none")]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "pip install 'steerable[metaworld]'" in lines[0]
    assert not (work / "none").exists()


class _Env480:
    """Meta-World as `steerable run --env lerobot` sees it: one 480x480 camera, 4 positional dimensions each way."""

    positional_features = True
    camera_keys = ("observation.image",)
    state_names = tuple(f"agent_pos_{i}" for i in range(4))
    action_names = tuple(f"action_{i}" for i in range(4))

    def camera_shapes(self) -> dict[str, tuple[int, int, int]]:
        return {"observation.image": (480, 480, 3)}


def test_a_lerobot_policy_trained_on_the_small_recording_gets_the_envs_frames_resized() -> None:
    from steerable.errors import ConfigError
    from steerable.runtime.lerobot.policy_features import match_features, resized

    outputs = {"action": ("ACTION", (4,))}
    inputs = {"observation.image": ("VISUAL", (3, 64, 64)), "observation.state": ("STATE", (4,))}
    assert match_features(inputs, outputs, _Env480(), None).resize == {"observation.image": (64, 64)}
    with pytest.raises(ConfigError, match="trained on 64x48 frames of observation.image; .* 480x480"):
        match_features({"observation.image": ("VISUAL", (3, 64, 48))}, outputs, _Env480(), None)  # another picture
    frame = np.zeros((480, 480, 3), dtype=np.uint8)
    frame[:, 240:] = 255
    small = resized(frame, (64, 64))
    assert small.shape == (64, 64, 3) and small[:, :31].max() == 0 and small[:, 33:].min() == 255
