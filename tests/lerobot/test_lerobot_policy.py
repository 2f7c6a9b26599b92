"""LeRobot policies as steerable's low level (`--low_level lerobot`), against the real `lerobot`.

For the same observations, every action steerable sends equals the one LeRobot's own inference path
gives (its sync inference engine: `select_action` between the policy's processors), tick after tick
and chunk after chunk: ACT with its action queue, ACT with temporal ensembling, diffusion with its
observation history. A policy that reads tokens (SmolVLA) gets the active subtask's; a mismatch of
names or dimensions is one line before the first action.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from lerobot.datasets import LeRobotDatasetMetadata
from lerobot_policies import drive, lerobot_actions, save_policy, synthetic_dataset, tiny_vlm

from steerable.cli.main import main
from steerable.errors import ConfigError
from steerable.runtime.lerobot.policy import load_lerobot_policy
from steerable.runtime.loop import Runtime
from steerable.runtime.stack import LeRobotOptions, StackSpec, build_low
from steerable.synthetic.env import SimEnv

REPO = Path(__file__).resolve().parents[2]
TASK = "put the red cube in the left bin"


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("lerobot_policy")


@pytest.fixture(scope="module")
def dataset(work: Path) -> Path:
    return synthetic_dataset(work / "dataset")


@pytest.fixture(scope="module")
def act(work: Path, dataset: Path) -> Path:
    return save_policy("act", dataset, work / "act")


def _steerable(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "steerable.cli.main", *args], capture_output=True, text=True,
                          timeout=240, cwd=REPO, env={**os.environ, "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1"},
                          stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("kind", ["act", "act temporal ensembling", "diffusion"])
def test_each_action_sent_equals_lerobots_own_inference_path(kind: str, work: Path, dataset: Path,
                                                             act: Path) -> None:
    if kind == "act":
        policy, seconds = act, 3.0
    elif kind == "diffusion":
        policy, seconds = save_policy("diffusion", dataset, work / "diffusion", cameras=["observation.images.top"]), 2.0
    else:
        policy, seconds = save_policy("act", dataset, work / "act_te", cameras=["observation.images.top"],
                                      n_action_steps=1, temporal_ensemble_coeff=0.01), 1.0
    run = drive(policy, task=TASK, seconds=seconds, seed=7)
    ticks = int(seconds * 15)
    assert len(run.sent) == len(run.seen) == ticks, (len(run.sent), len(run.seen), run.events)
    assert {command for _, command in run.seen} == {TASK}
    names, expected = lerobot_actions(policy, dataset, run.seen)
    assert names == list(SimEnv.action_names)
    sent = np.stack(run.sent)
    np.testing.assert_allclose(sent, expected, atol=1e-5, rtol=0)
    # Chunk after chunk: the queue refills every n_action_steps ticks, and each refill differs.
    steps = {"act": 5, "diffusion": 3}.get(kind, 1)
    firsts = sent[::steps]
    assert len({tuple(np.round(a, 6)) for a in firsts}) == len(firsts)
    # The postprocessor's output, in metres: the stats' range, not normalised numbers.
    stats = LeRobotDatasetMetadata("local/steerable_sim", root=dataset).stats["action"]
    low, high = np.asarray(stats["min"]), np.asarray(stats["max"])
    span = high - low
    assert ((sent > low - 3 * span) & (sent < high + 3 * span)).all(), sent


class _Reordered(SimEnv):
    """The simulator with its state and action features in reverse order (as a robot that lists its
    motors in another order than the dataset did)."""

    state_names = tuple(reversed(SimEnv.state_names))
    action_names = tuple(reversed(SimEnv.action_names))

    def observe(self, *, render: bool = True):  # type: ignore[no-untyped-def]
        obs = super().observe(render=render)
        return type(obs)(obs.state[::-1].copy(), obs.images, obs.time_s, self.state_names, obs.privileged)

    def send_action(self, action: np.ndarray) -> None:
        super().send_action(np.asarray(action)[::-1])


def test_features_are_matched_by_name_not_position(act: Path, dataset: Path) -> None:
    env = _Reordered(fps=15)
    env.reset(7, TASK)
    low = build_low(StackSpec(high_level="none", low_level="lerobot", lerobot=LeRobotOptions(str(act))), env)
    seen, sent = [], []
    act_fn, send = low.act, env.send_action
    low.act = lambda o, c: (seen.append((o, c)), act_fn(o, c))[1]  # type: ignore[method-assign]
    env.send_action = lambda a: (sent.append(np.array(a)), send(a))[1]  # type: ignore[method-assign]
    rt = Runtime(env, low, None)
    rt.submit("task", TASK)
    import torch

    torch.manual_seed(0)
    rt.run(max_ticks=10)
    assert len(sent) == 10
    # LeRobot's path reads the state by name (from the reversed observation) and names each action.
    names, expected = lerobot_actions(act, dataset, seen)
    by_name = np.stack(sent)[:, [env.action_names.index(n) for n in names]]
    np.testing.assert_allclose(by_name, expected, atol=1e-5, rtol=0)


class _Positional(SimEnv):
    """The simulator naming its vectors by position only, as a LeRobot gym simulator does."""

    positional_features = True

    def __init__(self, *, fps: int, actions: int = 4) -> None:
        super().__init__(fps=fps)
        self.state_names = tuple(f"agent_pos_{i}" for i in range(4))
        self.action_names = tuple(f"action_{i}" for i in range(actions))


def _renamed(dataset: Path, out: Path, feature: str, names: list[str]) -> Path:
    (out / "meta").mkdir(parents=True)
    info = json.loads((dataset / "meta" / "info.json").read_text())
    info["features"][feature]["names"] = names
    (out / "meta" / "info.json").write_text(json.dumps(info))
    return out


def test_a_mismatch_is_one_line_before_the_first_action(act: Path, dataset: Path, tmp_path: Path,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    env = SimEnv(fps=15)
    env.reset(0)
    renamed = _renamed(dataset, tmp_path / "renamed", "action", ["ee.x", "ee.y", "ee.z", "gripper.width"])
    with pytest.raises(ConfigError, match=r"actions \(ee.x, ee.y, ee.z, gripper.width\) do not match .*gripper.width"):
        load_lerobot_policy(str(act), env, dataset=str(renamed))
    three = _renamed(dataset, tmp_path / "three", "action", ["ee.x", "ee.y", "ee.z"])
    with pytest.raises(ConfigError, match="action has 4 dimensions but its dataset names 3"):
        load_lerobot_policy(str(act), env, dataset=str(three))
    state = _renamed(dataset, tmp_path / "state", "observation.state", ["j1", "j2", "j3", "j4"])
    with pytest.raises(ConfigError, match="state names .* missing j1, j2, j3, j4"):
        load_lerobot_policy(str(act), env, dataset=str(state))
    top_only = SimEnv(fps=15, cameras=("top",))
    top_only.reset(0)
    with pytest.raises(ConfigError, match="reads camera observation.images.wrist, which this environment does not"):
        load_lerobot_policy(str(act), top_only)
    legacy = SimEnv(fps=15, camera_shapes="legacy")
    legacy.reset(0)
    with pytest.raises(ConfigError, match="trained on 160x224 frames of observation.images.wrist; .* 128x128"):
        load_lerobot_policy(str(act), legacy)
    # A checkpoint that names nothing: the dimensions are checked, the environment's order assumed, said.
    bare = tmp_path / "bare"
    shutil.copytree(act, bare, ignore=shutil.ignore_patterns("train_config.json"))
    with caplog.at_level(logging.WARNING):
        assert not load_lerobot_policy(str(bare), env).features.named
    assert "does not name its state and action dimensions" in caplog.text
    # An environment whose vectors are only ordered (a gym simulator's spaces): matched by position.
    positional = _Positional(fps=15)
    positional.reset(0)
    assert not load_lerobot_policy(str(act), positional).features.named
    with pytest.raises(ConfigError, match="outputs 4 action dimensions but this environment takes 3"):
        load_lerobot_policy(str(act), _Positional(fps=15, actions=3))
    with pytest.raises(ConfigError, match="no such folder"):
        load_lerobot_policy(str(tmp_path / "missing"), env)
    with pytest.raises(ConfigError, match="no config.json there"):
        load_lerobot_policy(str(tmp_path), env)


def test_a_hub_id_goes_to_lerobot_and_its_failure_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    env = SimEnv(fps=15)
    env.reset(0)
    with pytest.raises(ConfigError) as err:
        load_lerobot_policy("nobody-here/no-such-policy", env)
    message = str(err.value)
    assert message.startswith("--lerobot.policy_path nobody-here/no-such-policy: not a LeRobot policy LeRobot can load")
    assert "\n" not in message


def test_steerable_run_drives_a_lerobot_checkpoint_and_records_it(act: Path, dataset: Path, tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    record = tmp_path / "rec"
    done = _steerable("run", "--high_level", "none", "--low_level", "lerobot", "--lerobot.policy_path", str(act),
                      "--seed", "7", "--task", TASK, "--max_seconds", "2", "--record", str(record))
    assert done.returncode == 0, done.stderr
    assert "low level: LeRobot act policy" in done.stdout and f"task: {TASK}" in done.stdout
    assert "Traceback" not in done.stderr and "failed" not in done.stdout
    table = pq.read_table(next((record / "data").rglob("*.parquet")), columns=["action", "observation.state"])
    actions = np.array(table.column("action").to_pylist())
    assert actions.shape == (30, 4) and len({tuple(a) for a in actions}) > 1
    stats = LeRobotDatasetMetadata("local/steerable_sim", root=dataset).stats["action"]
    assert (actions[:, 3] > np.asarray(stats["min"])[3] - 1).all()  # closure near [0, 1], never the table edge
    # The same checkpoint against a dataset that names other actions: one line, status 2, nothing moved
    # (the CLI in this process: lerobot is imported already).
    renamed = _renamed(dataset, tmp_path / "renamed", "action", ["ee.x", "ee.y", "ee.z", "gripper.width"])
    (tmp_path / "none.txt").write_text("/status\n")
    code = main(["run", "--high_level", "none", "--low_level", "lerobot", "--lerobot.policy_path", str(act),
                 "--lerobot.dataset", str(renamed), "--task", TASK, "--commands", str(tmp_path / "none.txt")])
    out, err = capsys.readouterr()
    assert code == 2 and "task:" not in out
    assert err.startswith("steerable: error: the policy's actions (ee.x, ee.y, ee.z, gripper.width) do not match")
    assert len(err.strip().splitlines()) == 1, err


def test_a_token_reading_policy_gets_the_active_subtask_and_an_interjection_changes_it(work: Path,
                                                                                      dataset: Path) -> None:
    from transformers import AutoTokenizer

    vlm = tiny_vlm(work / "vlm")
    policy = save_policy("smolvla", dataset, work / "smolvla", cameras=["observation.images.top"],
                         vlm_model_name=str(vlm))
    tokenizer = AutoTokenizer.from_pretrained(vlm)
    read: list[str] = []

    def spy(session: object) -> None:
        """Note the tokens each select_action call reads (the batch after LeRobot's preprocessor)."""
        model = session.runtime.low.policy  # type: ignore[attr-defined]
        select = model.select_action

        def select_action(batch: dict, **kwargs: object) -> object:
            read.append(tokenizer.decode(batch["observation.language.tokens"][0], skip_special_tokens=True))
            return select(batch, **kwargs)

        model.select_action = select_action

    # Under a high level: the tokens are its subtask's, not the task's.
    run = drive(policy, task=TASK, seconds=1.0, high_level="scripted", seed=7, on_session=spy)
    subtasks = [e.removeprefix("subtask: ") for e in run.events if e.startswith("subtask: ")]
    assert subtasks and subtasks[0] == "pick up the red cube", run.events
    assert read == [f"{subtasks[0]}\n"] * 15  # each tick's batch, tokenized with a newline as SmolVLA's processor does
    # Direct task: the task's tokens, then the operator's words once said.
    read.clear()
    run = drive(policy, task=TASK, seconds=2.0, seed=7, commands="@1s pick up the red cube\n", on_session=spy)
    assert "interjection: pick up the red cube" in run.events and len(read) == 30
    assert read[:15] == [f"{TASK}\n"] * 15 and read[15:] == ["pick up the red cube\n"] * 15, read
