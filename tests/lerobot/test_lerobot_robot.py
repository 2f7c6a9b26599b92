"""`steerable run --robot.type=...` on a robot LeRobot finds through its own plugin mechanism.

The robot (`plugins/lerobot_robot_mockarm`) is an SO-101-like arm on a fake motors bus, in degrees,
that logs every call to a file; the policy a tiny ACT built with LeRobot's classes, its stats in
degrees. Checked: the features and units the environment reads, the per-step bound (LeRobot's
`max_relative_target` where the config has it, steerable's otherwise), a policy whose action names
differ is refused before anything is sent, a camera-less robot records, and, driven in a terminal
(tmux) as an operator would: targets in robot units never move more than the bound from the last
one, and the robot is disconnected on /quit, on Ctrl-C (twice, too), on a policy error and on an error.
"""

from __future__ import annotations

import importlib
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from robot_helpers import MEAN, NAMES, STD, act_checkpoint, dataset_meta, plugin_site, read_log

from steerable.cli.main import main
from steerable.dataset.lerobot import LeRobotDataset
from steerable.errors import CommandError, ConfigError
from steerable.runtime.environments import EnvSpec, make_env
from steerable.runtime.lerobot.robot import LeRobotRobotEnv
from steerable.runtime.lerobot.robot_safety import DEFAULT_MAX_STEP, TargetBound
from steerable.runtime.loop import LoopRates, Runtime
from steerable.runtime.recording import Recorder

REPO = Path(__file__).resolve().parents[2]
SOCKET = f"steerable-robot-{uuid.uuid4().hex[:8]}"
START = {name: (50.0 if name == "gripper.pos" else 0.0) for name in NAMES}  # where the arm starts


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The plugin as an installed distribution, on this process's path too."""
    path = plugin_site(tmp_path_factory.mktemp("plugin"))
    sys.path.insert(0, str(path))
    importlib.invalidate_caches()
    yield path
    sys.path.remove(str(path))


@pytest.fixture(scope="module")
def policy(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return act_checkpoint(tmp_path_factory.mktemp("act"))


def _arm(tmp_path: Path, kind: str = "mock_arm", **options: str) -> dict[str, str]:
    return {"type": kind, "log": str(tmp_path / "arm.log"), "calibration_dir": str(tmp_path / "calibration"),
            **options}


def _sent(log: list[dict]) -> list[np.ndarray]:
    return [np.array([row["sent"][n] for n in NAMES]) for row in log if row["call"] == "send_action"]


def _assert_bounded(targets: list[np.ndarray], bound: float) -> None:
    previous = np.array([START[n] for n in NAMES])
    for i, target in enumerate(targets):
        step = np.abs(target - previous).max()
        assert step <= bound + 1e-4, f"target {i} moved {step:.3f} from the last one (bound {bound})"
        previous = target


def _assert_robot_units(targets: list[np.ndarray]) -> None:
    """The policy's targets are degrees around its stats' means (a normalised number would sit near 0)."""
    assert len(targets) >= 15, f"only {len(targets)} targets were sent"
    last = targets[-1]
    assert np.all(np.abs(last - np.array(MEAN)) < 8 * np.array(STD)), last
    assert last[0] > 15 and last[1] < -10 and last[2] > 20, last


# -- in this process -------------------------------------------------------------------------------------
def test_the_robot_is_built_from_lerobot_flags_and_bounded_per_step(site: Path, tmp_path: Path) -> None:
    env = make_env(EnvSpec("robot", {"robot": _arm(tmp_path, camera_width="32", camera_height="24")}), 30)
    assert isinstance(env, LeRobotRobotEnv)
    log = tmp_path / "arm.log"
    try:
        assert (env.robot_type, env.state_names, env.action_names) == ("mock_arm", NAMES, NAMES)
        assert env.camera_keys == ("observation.images.front",)
        assert env.camera_shapes() == {"observation.images.front": (24, 32, 3)}
        assert env.bound.limit.tolist() == [DEFAULT_MAX_STEP] * 6  # the config sets no max_relative_target
        env.reset(0, "wave")
        obs = env.observe()
        assert obs.state.tolist() == [START[n] for n in NAMES]  # degrees, the gripper 0-100
        assert obs.images["observation.images.front"].shape == (24, 32, 3)
        env.send_action(np.array([90.0, -90.0, 0.0, 0.0, 0.0, 100.0]))
        env.send_action(np.array([90.0, -90.0, 0.0, 0.0, 0.0, 100.0]))
        assert [t.tolist() for t in _sent(read_log(log))] == [[5.0, -5.0, 0.0, 0.0, 0.0, 55.0],
                                                               [10.0, -10.0, 0.0, 0.0, 0.0, 60.0]]
        before = len(read_log(log))
        with pytest.raises(CommandError, match="7 values for 6 action features"):
            env.send_action(np.zeros(7))
        with pytest.raises(CommandError, match="shoulder_pan.pos is not a number"):
            env.send_action(np.array([np.nan, 0, 0, 0, 0, 50]))
        assert len(read_log(log)) == before  # nothing sent
    finally:
        env.close()
    env.close()  # once only
    env.send_action(np.zeros(6))  # after close: refused silently, nothing reaches the robot
    calls = [row["call"] for row in read_log(log)]
    assert calls[0] == "connect" and calls.count("disconnect") == 1 and calls[-1] == "disconnect"


def test_the_bound_is_lerobots_max_relative_target_where_the_config_has_one(site: Path, tmp_path: Path) -> None:
    lerobot_field = make_env(EnvSpec("robot", {"robot": _arm(tmp_path, max_relative_target="2")}), 30)
    ours = make_env(EnvSpec("robot", {"robot": _arm(tmp_path, "mock_bare_arm", max_relative_target="3")}), 30)
    try:
        assert lerobot_field.robot.config.max_relative_target == 2.0  # LeRobot's own field, parsed by draccus
        assert lerobot_field.bound.limit.tolist() == [2.0] * 6
        assert not hasattr(ours.robot.config, "max_relative_target")  # steerable's alone
        assert ours.bound.limit.tolist() == [3.0] * 6
        for env in (lerobot_field, ours):
            env.reset(0)
            env.observe()
            env.send_action(np.full(6, 60.0))
        first, second = _sent(read_log(tmp_path / "arm.log"))
        assert first.tolist() == [2.0, 2.0, 2.0, 2.0, 2.0, 52.0]
        assert second.tolist() == [3.0, 3.0, 3.0, 3.0, 3.0, 53.0]
    finally:
        lerobot_field.close()
        ours.close()


def test_the_target_bound() -> None:
    names = ("a.pos", "gripper.pos", "x.vel")
    bound = TargetBound(names, {"a": 2.0, "gripper": 10.0, "x.vel": 0.5})  # by motor or by feature
    first = bound.clip(np.array([10.0, 80.0, 3.0]), {"a.pos": 1.0, "gripper.pos": 50.0})  # x.vel: not read, 0
    assert first.tolist() == [3.0, 60.0, 0.5] and bound.clipped == 1
    bound.sent(first)
    assert bound.clip(np.array([2.0, 61.0, 0.4]), {}).tolist() == [2.0, 61.0, 0.4] and bound.clipped == 1
    bound.reset()
    with pytest.raises(CommandError, match="where a.pos is cannot be read"):
        bound.clip(np.zeros(3), {"a.pos": float("nan")})
    with pytest.raises(ConfigError, match="names no bound for gripper"):
        TargetBound(names, {"a": 1.0, "x.vel": 1.0})
    with pytest.raises(ConfigError, match="must be positive"):
        TargetBound(names, 0.0)


def test_lerobot_flag_mistakes_are_one_line(site: Path, tmp_path: Path) -> None:
    for options, message in (
        ({"type": "mock_armm"}, "--robot.type=mock_armm: LeRobot knows no such robot (did you mean mock_arm?"),
        ({"type": "mock_arm", "prot": "x"}, "--robot.prot: a mock_arm robot has no field prot (did you mean "
                                            "--robot.port?)"),
        ({"type": "mock_arm", "speed": "fast"}, "--robot.* (mock_arm): Couldn't parse 'fast' into a float"),
        ({"port": "x"}, "--robot.type is missing"),
    ):
        with pytest.raises(ConfigError) as caught:
            make_env(EnvSpec("robot", {"robot": options}), 30)
        assert message in str(caught.value) and "\n" not in str(caught.value)


class _HoldStill:
    """A steerable test double (not a LeRobot stand-in): targets = where the arm is."""

    name = "hold still"
    wants_images = False

    def reset(self) -> None:
        pass

    def act(self, observation, command):
        from steerable.control import ActionChunk

        return ActionChunk(np.repeat(np.asarray(observation.state, dtype=np.float32)[None], 10, axis=0))


def test_a_camera_less_robot_runs_and_records(site: Path, tmp_path: Path) -> None:
    env = make_env(EnvSpec("robot", {"robot": _arm(tmp_path)}), 30)
    record = tmp_path / "rec"
    try:
        assert env.camera_keys == () and env.camera_shapes() == {}
        env.reset(0, "hold still")
        recorder = Recorder(record, fps=env.fps, robot_type=env.robot_type, state_names=env.state_names)
        rt = Runtime(env, _HoldStill(), None, rates=LoopRates(ctrl_hz=30), render=True)
        rt.listeners.append(recorder.on_event)
        rt.frame_hooks.append(recorder.on_frame)
        rt.submit("task", "hold still")
        rt.run(max_ticks=12)
        assert recorder.close() == record
    finally:
        env.close()
    data = LeRobotDataset(record)
    assert data.total_frames == 12 and data.camera_keys == []
    assert data.features["observation.state"]["names"] == list(NAMES)
    assert data.features["action"]["names"] == list(NAMES)
    assert len(_sent(read_log(tmp_path / "arm.log"))) >= 11


class _Reach(_HoldStill):
    """Targets 40 units past where the arm is: far more than one step's bound."""

    name = "reach"

    def act(self, observation, command):
        from steerable.control import ActionChunk

        return ActionChunk(np.repeat(np.asarray(observation.state, dtype=np.float32)[None] + 40.0, 10, axis=0))


def test_a_recording_stores_the_bounded_targets_the_robot_got(site: Path, tmp_path: Path) -> None:
    env = make_env(EnvSpec("robot", {"robot": _arm(tmp_path)}), 30)
    record = tmp_path / "rec"
    try:
        env.reset(0, "reach")
        recorder = Recorder(record, fps=env.fps, robot_type=env.robot_type, state_names=env.state_names)
        rt = Runtime(env, _Reach(), None, rates=LoopRates(ctrl_hz=30), render=True)
        rt.listeners.append(recorder.on_event)
        rt.frame_hooks.append(recorder.on_frame)
        rt.submit("task", "reach")
        rt.run(max_ticks=8)
        assert recorder.close() == record
    finally:
        env.close()
    sent = _sent(read_log(tmp_path / "arm.log"))
    _assert_bounded(sent, 5.0)
    import pyarrow.parquet as pq

    table = pq.read_table(next((record / "data").rglob("*.parquet")), columns=["action"])
    recorded = np.array(table.column("action").to_pylist(), dtype=np.float64)
    moving = [row for row in recorded if np.abs(row - np.array([START[n] for n in NAMES])).max() > 1e-3]
    assert moving, "the arm never moved"
    # each tick's recorded action is the target the robot was sent in that tick, never the policy's far one
    assert len(moving) == len(sent)
    np.testing.assert_allclose(np.stack(moving), np.stack(sent), atol=1e-3)


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(["run", *args])
    return code, capsys.readouterr().err


def test_a_policy_for_other_action_features_is_refused_before_anything_moves(
        site: Path, policy: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ckpt, _ = policy
    dataset = dataset_meta(tmp_path / "other_arm", (*NAMES[:5], "jaw.pos"))
    commands = tmp_path / "commands.txt"
    commands.write_text("@1s /quit\n")
    code, err = _run(["--robot.type=mock_arm", f"--robot.log={tmp_path / 'arm.log'}",
                      f"--robot.calibration_dir={tmp_path}", "--robot.camera_width=32", "--robot.camera_height=24",
                      "--low_level", "lerobot", "--lerobot.policy_path", str(ckpt), "--lerobot.dataset", str(dataset),
                      "--high_level", "none", "--task", "wave", "--commands", str(commands)], capsys)
    assert code == 2
    lines = [line for line in err.splitlines() if line.startswith("steerable: error:")]
    assert len(lines) == 1 and "jaw.pos" in lines[0], err
    calls = [row["call"] for row in read_log(tmp_path / "arm.log")]
    assert calls == ["connect", "disconnect"]  # nothing sent, and let go


def test_an_error_in_the_loop_disconnects_the_robot(
        site: Path, policy: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ckpt, dataset = policy
    commands = tmp_path / "commands.txt"
    commands.write_text("@5s /quit\n")
    code, err = _run(["--robot.type=mock_arm", f"--robot.log={tmp_path / 'arm.log'}",
                      f"--robot.calibration_dir={tmp_path}", "--robot.camera_width=32", "--robot.camera_height=24",
                      "--robot.glitch=nan", "--robot.glitch_after=10", "--low_level", "lerobot",
                      "--lerobot.policy_path", str(ckpt), "--lerobot.dataset", str(dataset), "--high_level", "none",
                      "--task", "wave", "--ctrl_hz", "30", "--commands", str(commands)], capsys)
    assert code == 2, err
    assert "steerable: error: robot: the target for shoulder_pan.pos" in err and "nothing sent" in err
    log = read_log(tmp_path / "arm.log")
    assert log[-1]["call"] == "disconnect"
    sent = _sent(log)
    assert 5 <= len(sent) <= 10 and all(np.all(np.isfinite(t)) for t in sent)


# -- in a terminal, as an operator --------------------------------------------------------------------------
def _tmux(*args: str) -> str:
    return subprocess.run(["tmux", "-L", SOCKET, *args], capture_output=True, text=True, check=True).stdout


def _wait(what: str, check, timeout: float = 90.0, session: str | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.2)
    screen = _tmux("capture-pane", "-p", "-t", session) if session else ""
    raise AssertionError(f"{what} never happened:\n{screen}")


class _Terminal:
    """`steerable run` on the mock arm in a tmux window; its exit status lands in a file."""

    def __init__(self, site: Path, policy: tuple[Path, Path], tmp_path: Path, *extra: str) -> None:
        assert shutil.which("tmux"), "tmux is missing: apt-get install -y tmux (make test does)"
        ckpt, dataset = policy
        self.log = tmp_path / "arm.log"
        self.done = tmp_path / "exit_code"
        cmd = [sys.executable, "-m", "steerable.cli.main", "run", "--robot.type=mock_arm", f"--robot.log={self.log}",
               f"--robot.calibration_dir={tmp_path}", "--robot.camera_width=32", "--robot.camera_height=24",
               "--low_level", "lerobot", "--lerobot.policy_path", str(ckpt), "--lerobot.dataset", str(dataset),
               "--high_level", "none", "--task", "wave hello", "--ctrl_hz", "30", *extra]
        env = f"PYTHONPATH={shlex.quote(str(site))} HF_HUB_OFFLINE=1"
        shell = (f"cd {shlex.quote(str(REPO))} && env {env} {shlex.join(cmd)}; echo $? > {shlex.quote(str(self.done))}"
                 "; sleep 60")
        self.name = f"robot-{uuid.uuid4().hex[:8]}"
        _tmux("new-session", "-d", "-s", self.name, "-x", "140", "-y", "40", shell)

    def screen(self) -> str:
        return _tmux("capture-pane", "-p", "-t", self.name)

    def sent(self) -> list[np.ndarray]:
        return _sent(read_log(self.log))

    def wait_for_targets(self, n: int) -> None:
        _wait(f"{n} targets sent", lambda: len(self.sent()) >= n, session=self.name)

    def keys(self, *keys: str) -> None:
        _tmux("send-keys", "-t", self.name, *keys)

    def exit_code(self) -> str:
        _wait("the exit", self.done.exists, timeout=60, session=self.name)
        return self.done.read_text().strip()

    def close(self) -> None:
        subprocess.run(["tmux", "-L", SOCKET, "kill-session", "-t", self.name], capture_output=True)


def test_quit_after_a_policy_error_in_a_terminal(site: Path, policy: tuple[Path, Path], tmp_path: Path) -> None:
    term = _Terminal(site, policy, tmp_path, "--robot.glitch=channels", "--robot.glitch_after=40")
    try:
        _wait("the panel", lambda: "steerable run · robot · action" in term.screen(), session=term.name)
        _wait("the policy error", lambda: "failed on 'wave hello'" in term.screen(), session=term.name)
        assert "Error" in term.screen()  # the exception's type is shown with its message
        stopped = len(term.sent())
        time.sleep(1.0)
        assert len(term.sent()) == stopped  # after the error the robot holds still
        term.keys("/quit", "Enter")
        assert term.exit_code() == "0"
    finally:
        term.close()
    log = read_log(term.log)
    assert log[0]["call"] == "connect" and log[-1]["call"] == "disconnect"
    targets = _sent(log)
    assert len(targets) < 40
    _assert_bounded(targets, DEFAULT_MAX_STEP)
    _assert_robot_units(targets)


def test_ctrl_c_in_a_terminal_disconnects_and_keeps_the_recording(
        site: Path, policy: tuple[Path, Path], tmp_path: Path) -> None:
    record = tmp_path / "rec"
    term = _Terminal(site, policy, tmp_path, "--record", str(record), "--robot.max_relative_target=4")
    try:
        term.wait_for_targets(25)
        term.keys("C-c")
        assert term.exit_code() == "130"
        assert "interrupted: robot stopped" in term.screen()
    finally:
        term.close()
    log = read_log(term.log)
    assert log[-1]["call"] == "disconnect" and [r["call"] for r in log].count("disconnect") == 1
    targets = _sent(log)
    _assert_bounded(targets, 4.0)
    _assert_robot_units(targets)
    data = LeRobotDataset(record)
    assert data.camera_keys == ["observation.images.front"] and data.total_frames >= len(targets) - 1
    assert data.features["action"]["names"] == list(NAMES)


def test_a_second_ctrl_c_still_disconnects(site: Path, policy: tuple[Path, Path], tmp_path: Path) -> None:
    term = _Terminal(site, policy, tmp_path)
    try:
        term.wait_for_targets(10)
        term.keys("C-c")
        term.keys("C-c")
        assert term.exit_code() == "130"
    finally:
        term.close()
    log = read_log(term.log)
    assert log[-1]["call"] == "disconnect" and [r["call"] for r in log].count("disconnect") == 1
    _assert_bounded(_sent(log), DEFAULT_MAX_STEP)


def test_the_plugin_is_found_as_an_installed_distribution(site: Path) -> None:
    from importlib.metadata import distributions

    names = {d.metadata.get("Name") for d in distributions(path=[str(site)])}
    assert names == {"lerobot_robot_mockarm"}  # a folder on the path, nothing installed into the venv
