"""The loop and a controller that keeps its own action queue (a LeRobot policy's `select_action`):
asked on every tick for that tick's action; and a controller's exception named by its type."""

from __future__ import annotations

import numpy as np
import pytest

from steerable.control import ActionChunk, Observation
from steerable.runtime.loop import LoopRates, Runtime


class OneStateEnv:
    fps = 15
    robot_type = "test"
    state_names = ("x",)
    action_names = ("x",)
    camera_keys = ()

    def __init__(self) -> None:
        self.sent: list[float] = []

    def camera_shapes(self) -> dict[str, tuple[int, int, int]]:
        return {}

    def observe(self, *, render: bool = True) -> Observation:
        return Observation(np.array([len(self.sent)], dtype=np.float32), state_names=self.state_names)

    def send_action(self, action: np.ndarray) -> None:
        self.sent.append(float(action[0]))


class StepController:
    """One action per call, the observation's step count: what it returns is what that tick sends."""

    name = "step controller"
    wants_images = False

    def __init__(self, every_tick: bool) -> None:
        self.every_tick = every_tick
        self.calls = 0

    def act(self, observation: Observation, command: str) -> ActionChunk:
        self.calls += 1
        return ActionChunk(np.array([[observation.state[0]]], dtype=np.float32))

    def reset(self) -> None:
        pass


@pytest.mark.parametrize("every_tick", [True, False])
def test_an_every_tick_controller_is_asked_on_each_tick_for_that_ticks_action(every_tick: bool) -> None:
    env, low = OneStateEnv(), StepController(every_tick)
    rt = Runtime(env, low, None, rates=LoopRates(ctrl_hz=15, chunk_hz=5))
    rt.submit("task", "count")
    rt.run(max_ticks=30)
    if every_tick:  # 30 calls, and each tick sent the action computed from its own observation
        assert low.calls == 30 and env.sent == [float(i) for i in range(30)]
    else:  # the chunk gate: 5 calls a second, the robot holding still between them
        assert low.calls == 10 and len(env.sent) == 10


class Failing(StepController):
    def __init__(self, exc: Exception) -> None:
        super().__init__(every_tick=True)
        self.exc = exc

    def act(self, observation: Observation, command: str) -> ActionChunk:
        raise self.exc


@pytest.mark.parametrize(("exc", "shown"), [(AssertionError(), "AssertionError"),
                                           (ValueError("n_obs_steps queue empty"),
                                            "ValueError: n_obs_steps queue empty")])
def test_a_controller_exception_is_reported_with_its_type_and_message(exc: Exception, shown: str) -> None:
    env = OneStateEnv()
    rt = Runtime(env, Failing(exc), None)
    warnings: list[str] = []
    rt.listeners.append(lambda e: warnings.append(e.text) if e.kind == "warn" else None)
    rt.submit("task", "pick up the red cube")
    rt.run(max_ticks=5)
    assert warnings == [f"step controller failed on 'pick up the red cube': {shown}; holding still"]
    assert rt.state.controller_error == shown and env.sent == []
