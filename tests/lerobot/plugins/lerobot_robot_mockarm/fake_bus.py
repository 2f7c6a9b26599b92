"""A motors bus with no serial port behind it: Feetech-like servos held in memory.

Each motor has a raw position in encoder ticks (0..4095) and a goal; a reading moves the present
position towards the goal by at most `speed` ticks (the servo's motion between two reads). Values
cross the bus in robot units, as LeRobot's buses give them: degrees about the middle of the
calibrated range for the body joints, 0-100 over the range for the gripper.
"""

from __future__ import annotations

from lerobot.motors import Motor, MotorCalibration, MotorNormMode
from lerobot.motors.motors_bus import MotorsBusBase

RESOLUTION = 4096


class FakeMotorsBus(MotorsBusBase):
    def __init__(self, port: str, motors: dict[str, Motor], calibration: dict[str, MotorCalibration] | None = None,
                 *, speed: float = 400.0) -> None:
        super().__init__(port, motors, calibration)
        if not self.calibration:
            self.calibration = {name: MotorCalibration(m.id, 0, 0, 0, RESOLUTION - 1) for name, m in motors.items()}
        self.speed = speed
        self.present = {name: (RESOLUTION - 1) / 2 for name in motors}
        self.goal = dict(self.present)
        self.torque = False
        self._connected = False

    # -- units ------------------------------------------------------------------------------------------
    def _to_units(self, name: str, raw: float) -> float:
        cal = self.calibration[name]
        if self.motors[name].norm_mode is MotorNormMode.DEGREES:
            return (raw - (cal.range_min + cal.range_max) / 2) * 360.0 / (RESOLUTION - 1)
        return (raw - cal.range_min) / (cal.range_max - cal.range_min) * 100.0

    def _to_raw(self, name: str, value: float) -> float:
        cal = self.calibration[name]
        if self.motors[name].norm_mode is MotorNormMode.DEGREES:
            raw = value * (RESOLUTION - 1) / 360.0 + (cal.range_min + cal.range_max) / 2
        else:
            raw = value / 100.0 * (cal.range_max - cal.range_min) + cal.range_min
        return min(max(raw, cal.range_min), cal.range_max)

    def set_units(self, name: str, value: float) -> None:
        self.present[name] = self.goal[name] = self._to_raw(name, value)

    # -- the bus ----------------------------------------------------------------------------------------
    @property
    def is_connected(self) -> bool:
        return self._connected

    def connect(self, handshake: bool = True) -> None:
        if self._connected:
            raise RuntimeError(f"{self.port} is already connected")
        self._connected = True

    def disconnect(self, disable_torque: bool = True) -> None:
        if not self._connected:
            raise RuntimeError(f"{self.port} is not connected")
        if disable_torque:
            self.torque = False
        self._connected = False

    def _check(self) -> None:
        if not self._connected:
            raise RuntimeError(f"{self.port} is not connected")

    def _move(self) -> None:
        if not self.torque:
            return
        for name, goal in self.goal.items():
            step = max(-self.speed, min(self.speed, goal - self.present[name]))
            self.present[name] += step

    def read(self, data_name: str, motor: str) -> float:
        return self.sync_read(data_name, [motor])[motor]

    def write(self, data_name: str, motor: str, value: float) -> None:
        self.sync_write(data_name, {motor: value})

    def sync_read(self, data_name: str, motors: str | list[str] | None = None, **_: object) -> dict[str, float]:
        self._check()
        names = [motors] if isinstance(motors, str) else list(motors or self.motors)
        if data_name == "Present_Position":
            self._move()
            return {n: self._to_units(n, self.present[n]) for n in names}
        if data_name == "Goal_Position":
            return {n: self._to_units(n, self.goal[n]) for n in names}
        raise KeyError(data_name)

    def sync_write(self, data_name: str, values: dict[str, float]) -> None:
        self._check()
        if data_name != "Goal_Position":
            return  # control-table settings: nothing to model
        for name, value in values.items():
            self.goal[name] = self._to_raw(name, float(value))

    def enable_torque(self, motors: str | list[str] | None = None, num_retry: int = 0) -> None:
        self._check()
        self.torque = True

    def disable_torque(self, motors: str | list[str] | None = None, num_retry: int = 0) -> None:
        self._check()
        self.torque = False

    def read_calibration(self) -> dict[str, MotorCalibration]:
        return dict(self.calibration)

    def write_calibration(self, calibration_dict: dict[str, MotorCalibration], cache: bool = True) -> None:
        self.calibration = dict(calibration_dict)
