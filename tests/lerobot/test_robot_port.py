"""A robot that cannot connect is one line, and a port that does not exist is refused at once (#34, item 18).

LeRobot's connection errors start with a newline and span several lines ("steerable: error:" then an
empty line); a `--robot.port` device path that does not exist is refused before LeRobot's robots are
imported or anything is opened.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from steerable.cli.main import main
from steerable.errors import ConfigError
from steerable.runtime.environments import EnvSpec, make_env
from steerable.runtime.lerobot import robot as robot_module
from steerable.runtime.lerobot.robot import LeRobotRobotEnv

PORT = "/dev/ttyACM_steerable_34"  # no such device


def _no_import() -> None:
    raise AssertionError("LeRobot's robots were imported for a port that does not exist")


def test_a_port_that_does_not_exist_is_refused_before_lerobot_is_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(robot_module, "register_lerobot_choices", _no_import)
    with pytest.raises(ConfigError) as caught:
        make_env(EnvSpec("robot", {"robot": {"type": "so101_follower", "port": PORT, "id": "arm"}}), 30)
    assert str(caught.value).startswith(f"--robot.port={PORT}: no such device")
    assert "\n" not in str(caught.value)


def test_the_cli_says_it_in_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    """At once: nothing of LeRobot's is imported (that alone took seconds) before the line."""
    monkeypatch.setattr(robot_module, "register_lerobot_choices", _no_import)
    (tmp_path / "none.txt").write_text("/status\n")
    code = main(["run", "--robot.type=so101_follower", f"--robot.port={PORT}", "--robot.id=arm",
                 "--high_level", "none", "--task", "wave", "--commands", str(tmp_path / "none.txt")])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith(f"steerable: error: --robot.port={PORT}: no such device")
    assert err.count("\n") == 1


class _Unplugged:
    """A LeRobot robot failing as an SO-101 fails: its bus cannot open the port, or (`opened`) opens it
    but no motor answers, and then its own disconnect fails too (it disables the motors' torque)."""

    name = "so101_follower"
    observation_features: dict[str, Any] = {"shoulder_pan.pos": float}
    action_features: dict[str, Any] = {"shoulder_pan.pos": float}

    def __init__(self, port: str, *, opened: bool = False) -> None:
        self.config = type("Config", (), {"port": port})()
        self.opened = opened
        self.is_connected = False

    def connect(self) -> None:
        if not self.opened:
            raise ConnectionError(f"\nCould not open '{self.config.port}'.\nCheck the cable.\n")
        self.is_connected = True
        raise RuntimeError("motor check failed:\n\nMissing motor IDs:\n  - 1\n  - 2\n")

    def disconnect(self) -> None:
        assert self.is_connected, "never connected: nothing to disconnect"
        raise ConnectionError("Failed to write 'Torque_Enable' on id_=1 after 6 tries.")


def test_a_robot_that_does_not_connect_is_one_line(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    port = tmp_path / "ttyUSB0"
    port.touch()  # the port exists; the robot behind it does not answer
    with pytest.raises(ConfigError) as caught:
        LeRobotRobotEnv(_Unplugged(str(port)))
    assert str(caught.value) == (f"the so101_follower robot did not connect on port {port}: ConnectionError: "
                                 f"Could not open '{port}'. Check the cable.")
    # Its port open but no motor answering: the reason stays the error, the failed disconnect a warning.
    with caplog.at_level(logging.WARNING), pytest.raises(ConfigError) as caught:
        LeRobotRobotEnv(_Unplugged(str(port), opened=True))
    assert str(caught.value) == (f"the so101_follower robot did not connect on port {port}: RuntimeError: "
                                 "motor check failed: Missing motor IDs: - 1 - 2")
    assert "did not disconnect cleanly after its failed start: ConnectionError: Failed to write" in caplog.text
