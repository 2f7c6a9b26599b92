"""A LeRobot robot as a steerable environment: `steerable run --robot.type=TYPE --robot.*`.

The robot is built as LeRobot's own scripts build it: the `--robot.*` flags parsed into LeRobot's
`RobotConfig` registry (its robots and the installed `lerobot_robot_*` plugins:
`steerable.runtime.lerobot.env_flags`), then `make_robot_from_config`, then `connect()`. A
`--robot.port` that names a device path which does not exist is refused first, before LeRobot is
imported (seconds on a small machine); a robot that does not connect is one line naming it (LeRobot's
own messages span several lines).

State = the robot's float observation features in their declared order (`shoulder_pan.pos`...),
images = its camera features (`observation.images.<camera>`, none for a camera-less robot), and an
action row is sent as `{feature: value}` over `action_features`, in robot units. Safety:
- every target moves at most a bound per control step from the last one sent
  (`steerable.runtime.lerobot.robot_safety`): the robot config's `max_relative_target` where it sets
  one (LeRobot then also clips against the present position itself), else `DEFAULT_MAX_STEP`;
  `--robot.max_relative_target=N` sets it for any robot (for one whose config has no such field it is
  steerable's alone);
- an action of the wrong size or holding a non-number is refused whole (nothing is sent);
- the robot is disconnected on every way out: `close()` (the session's, on quit, Ctrl-C, an error),
  and, should a way out skip it (a second Ctrl-C at the wrong moment), at interpreter exit; the
  disconnect itself is not interrupted by Ctrl-C.
"""

from __future__ import annotations

import atexit
import dataclasses
import logging
import os
import signal
import sys
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import numpy as np
import yaml

from steerable.control import EpisodeSpec, Observation
from steerable.errors import ConfigError, SteerableError
from steerable.runtime.lerobot.env_flags import choice_config, register_lerobot_choices
from steerable.runtime.lerobot.robot_safety import DEFAULT_MAX_STEP, TargetBound

__all__ = ["LeRobotRobotEnv", "make_robot", "robot_environment"]

logger = logging.getLogger(__name__)

BOUND_FIELD = "max_relative_target"


def _bound_value(text: Any) -> float | dict[str, float]:
    value = yaml.safe_load(text) if isinstance(text, str) else text
    if isinstance(value, Mapping):
        return {str(k): float(v) for k, v in value.items()}
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"--robot.{BOUND_FIELD}={text}: give a number (robot units per step) or "
                          "{motor: number}") from None


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:300]}" if text else type(exc).__name__


def _check_port(options: Mapping[str, Any]) -> None:
    """A `--robot.port` device path that does not exist: one line, before anything is imported or
    opened. Only an absolute path is checked: some robots' `port` is a number or a CAN interface."""
    port = options.get("port")
    if isinstance(port, str) and os.path.isabs(port) and not os.path.exists(port):
        raise ConfigError(f"--robot.port={port}: no such device; is the robot plugged in and powered? "
                          "(lerobot-find-port lists the serial ports)")


def make_robot(options: Mapping[str, Any]) -> tuple[Any, float | dict[str, float]]:
    """The (unconnected) LeRobot robot the `--robot.*` options describe, and its per-step bound."""
    _check_port(options)
    register_lerobot_choices("robot")  # first: without lerobot installed, the one line that says which extra
    from lerobot.robots import RobotConfig, make_robot_from_config
    options = dict(options)
    chosen = RobotConfig.get_known_choices().get(options.get("type"))
    own_bound = None
    if chosen is not None and BOUND_FIELD not in {f.name for f in dataclasses.fields(chosen)}:
        own_bound = options.pop(BOUND_FIELD, None)  # this robot has no such field: the bound is ours alone
    config = choice_config(RobotConfig, "robot", options)
    configured = getattr(config, BOUND_FIELD, None) if own_bound is None else own_bound
    bound = _bound_value(configured) if configured is not None else DEFAULT_MAX_STEP
    try:
        robot = make_robot_from_config(config)
    except (ValueError, ImportError, TypeError) as exc:
        raise ConfigError(f"--robot.type={options['type']}: LeRobot cannot build it ({exc})") from exc
    return robot, bound


def robot_environment(*, fps: int = 30, robot: Mapping[str, Any] | None = None) -> LeRobotRobotEnv:
    """The registry's `robot` entry: the robot that `--robot.*` (here `robot`) describes, connected."""
    if not robot:
        raise ConfigError("--env robot needs a LeRobot robot: --robot.type=TYPE and its flags "
                          "(e.g. --robot.type=so101_follower --robot.port=/dev/ttyACM0 --robot.id=my_arm)")
    built, bound = make_robot(robot)
    return LeRobotRobotEnv(built, fps=fps, max_step=bound)


@contextmanager
def _uninterrupted() -> Iterator[None]:
    """Ctrl-C waits until the block is done (a disconnect half done leaves motors powered)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def note(signum: int, frame: object) -> None:
        sys.stderr.write("disconnecting the robot; a moment\n")

    previous = signal.signal(signal.SIGINT, note)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


class LeRobotRobotEnv:
    """An `Environment` over a LeRobot `Robot` (see the module docstring). A robot has no scene to
    reset and cannot judge success: `reset` keeps the task as given, `success` is None."""

    def __init__(self, robot: Any, *, fps: int = 30, max_step: float | Mapping[str, float] = DEFAULT_MAX_STEP,
                 connect: bool = True) -> None:
        self.robot = robot
        self.fps = fps
        features: Mapping[str, Any] = robot.observation_features
        self.state_names = tuple(k for k, v in features.items() if v is float)
        self.cameras = tuple(k for k, v in features.items() if isinstance(v, tuple) and len(v) == 3 and v[2] == 3)
        self.camera_keys = tuple(f"observation.images.{k}" for k in self.cameras)
        self.action_names: tuple[str, ...] = tuple(robot.action_features)
        self.robot_type = str(getattr(robot, "name", None) or type(robot).__name__)
        self._shapes = {f"observation.images.{k}": (int(features[k][0]), int(features[k][1]), 3) for k in self.cameras}
        self.bound = TargetBound(self.action_names, max_step)
        self.last_sent: np.ndarray | None = None  # the bounded targets of the last send_action
        self.steps = 0
        self.present: dict[str, float] = {}  # the last reading of each float feature
        self._lock = threading.Lock()
        self.closed = False
        if connect and not robot.is_connected:
            try:
                robot.connect()
            except BaseException as exc:
                self._disconnect(after_failed_start=True)
                if isinstance(exc, Exception) and not isinstance(exc, SteerableError):
                    config = getattr(robot, "config", None)
                    kind = getattr(config, "type", None) or self.robot_type  # as --robot.type names it
                    port = getattr(config, "port", None)
                    where = f" on port {port}" if port else ""
                    raise ConfigError(f"the {kind} robot did not connect{where}: {_one_line(exc)}") from exc
                raise
        atexit.register(self.close)  # a way out that skipped close() still lets go of the robot

    def camera_shapes(self) -> dict[str, tuple[int, int, int]]:
        return dict(self._shapes)  # (H, W, 3) as the robot declares them

    def reset(self, seed: int, task: str | None = None) -> EpisodeSpec:
        self.steps = 0
        self.bound.reset()
        self.last_sent = None
        return EpisodeSpec(task or "")

    def success(self) -> bool | None:
        return None

    def observe(self, *, render: bool = True) -> Observation:
        raw = self.robot.get_observation()
        self.present = {k: float(raw[k]) for k in self.state_names}
        state = np.array([self.present[k] for k in self.state_names], dtype=np.float32)
        images = {f"observation.images.{k}": np.asarray(raw[k]) for k in self.cameras} if render else {}
        return Observation(state, images, self.steps / self.fps, self.state_names)

    def send_action(self, action: np.ndarray) -> None:
        """Send one row of targets, bounded (see the module docstring); refused after `close()`."""
        with self._lock:
            if self.closed:
                return
            if self.bound.last is None and not self.present:
                self.observe(render=False)  # the first target is bounded from where the robot is
            targets = self.bound.clip(action, self.present)
            sent = self.robot.send_action({name: float(v) for name, v in zip(self.action_names, targets, strict=True)})
            taken = [float(sent.get(n, t)) if isinstance(sent, Mapping) else float(t)
                     for n, t in zip(self.action_names, targets, strict=True)]
            self.bound.sent(np.array(taken))
            self.last_sent = np.array(taken, dtype=np.float32)  # what a recording stores
            self.steps += 1

    def close(self) -> None:
        """Disconnect the robot (idempotent; Ctrl-C cannot interrupt it)."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
        atexit.unregister(self.close)
        if self.bound.clipped:
            logger.info("robot: %d step(s) had a target held back by the per-step bound", self.bound.clipped)
        self._disconnect()

    def _disconnect(self, *, after_failed_start: bool = False) -> None:
        """Let go of the robot. After a failed `connect()` its own disconnect may fail too (an SO-101
        whose motors never answered cannot have their torque disabled): logged then, so the reason it
        did not start stays the error."""
        with _uninterrupted():
            if not self.robot.is_connected:
                return
            try:
                self.robot.disconnect()
            except Exception as exc:
                if not after_failed_start:
                    raise
                logger.warning("the %s robot did not disconnect cleanly after its failed start: %s",
                               self.robot_type, _one_line(exc))
