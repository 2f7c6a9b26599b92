"""A slow or hung high-level model does not block the real-time control loop (issue 10, item 2).

The stub model blocks on an Event for many control periods; meanwhile the loop must keep ticking and
dispatching at its rate, apply `/pause` at once, and discard a reply that comes back for an older
revision (after a pause or an interjection), exactly as a stale action chunk is discarded.
"""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path

import numpy as np

from annotate_helpers import steerable
from runtime_helpers import running, wait_for
from steerable.control import ActionChunk, HighLevelRequest, HighLevelUpdate, Observation
from steerable.runtime.loop import LoopRates, Runtime, RuntimeEvent
from steerable.runtime.session import status_lines
from steerable.testing.server import TestServer
from steerable.testing.server.faults import FaultPlan
from steerable.tools import SayTool, ToolRegistry
from test_runtime_vlm import TASK, FakeVLM

CTRL_HZ = 50.0


class Env:
    fps = 50
    action_dim = 2
    state_names: tuple[str, ...] = ("a", "b")
    camera_keys: tuple[str, ...] = ()

    def __init__(self) -> None:
        self.sent: list[np.ndarray] = []

    def observe(self, *, render: bool = True) -> Observation:
        return Observation(state=np.zeros(2, dtype=np.float32))

    def send_action(self, action: np.ndarray) -> None:
        self.sent.append(action)

    def close(self) -> None:
        pass


class Controller:
    name = "chunk controller"
    wants_images = False

    def act(self, observation: Observation, command: str) -> ActionChunk:
        return ActionChunk(np.zeros((4, 2), dtype=np.float32))

    def reset(self) -> None:
        pass


class HangingPlanner:
    """Answers the first update at once; later updates block until `release` is set (a hung VLM)."""

    name = "hanging planner (test double)"
    wants_images = False

    def __init__(self, hang_from: int = 2, hang_once: str | None = None) -> None:
        self.hang_from = hang_from  # the first update call that hangs (1-based)
        self.hang_once = hang_once  # or: the first call of this kind hangs
        self.entered, self.release = threading.Event(), threading.Event()
        self.requests: list[HighLevelRequest] = []
        self.threads: set[str] = set()

    def update(self, request: HighLevelRequest) -> HighLevelUpdate:
        self.requests.append(request)
        self.threads.add(threading.current_thread().name)
        if request.kind == self.hang_once and not self.entered.is_set():
            self.entered.set()
            assert self.release.wait(10)
        if request.kind == "interjection":
            return HighLevelUpdate(subtask="place it in the right bin", speech="OK, the right bin.")
        if request.kind == "ask":
            return HighLevelUpdate(answer="The red cube is in the gripper.")
        if len(self.requests) < self.hang_from:
            return HighLevelUpdate(subtask="pick up the red cube")
        self.entered.set()
        assert self.release.wait(10)
        return HighLevelUpdate(subtask="a reply nobody should see")

    def reset(self) -> None:
        pass


def _setup(hang_from: int = 2, hang_once: str | None = None) -> tuple[Runtime, Env, HangingPlanner, list[RuntimeEvent]]:
    env, planner = Env(), HangingPlanner(hang_from, hang_once)
    rates = LoopRates(ctrl_hz=CTRL_HZ, chunk_hz=CTRL_HZ, high_level_hz=5.0)
    tools = ToolRegistry([SayTool(on_speech=lambda s: None)])
    rt = Runtime(env, Controller(), planner, tools=tools, rates=rates, realtime=True)
    events: list[RuntimeEvent] = []
    rt.listeners.append(events.append)
    rt.submit("task", "put the red cube in the left bin")
    return rt, env, planner, events


def test_a_hung_model_does_not_stop_ticks_dispatch_or_pause() -> None:
    rt, env, planner, events = _setup()
    with running(rt):
        assert planner.entered.wait(5), "the periodic update never came"
        assert rt.state.snapshot().subtask == "pick up the red cube"
        ticks, sent = rt.stats.ticks, len(env.sent)
        time.sleep(20 / CTRL_HZ)  # 20 control periods with the model hanging
        # The loop kept its rate and the robot kept executing the current command.
        assert rt.stats.ticks - ticks >= 10 and len(env.sent) - sent >= 10
        assert not planner.release.is_set() and not rt.idle  # a call in flight is work left
        assert "(thinking for " in "\n".join(status_lines(rt))  # /status tells the operator
        rt.submit("pause")
        wait_for(lambda: rt.state.mode == "paused")  # applied while the model still hangs
        held = len(env.sent)
        ticks = rt.stats.ticks
        time.sleep(10 / CTRL_HZ)
        assert len(env.sent) == held and rt.stats.ticks - ticks >= 5  # still ticking, holding still
        planner.release.set()
        wait_for(lambda: rt.stats.high_level_discarded == 1)  # computed before the pause: dropped
        assert rt.state.snapshot().subtask == "pick up the red cube"
    assert "steerable-high-level" in planner.threads  # the model ran off the control thread
    assert [e.text for e in events if e.kind == "mode"] == ["paused: robot holding still"]
    assert all(e.text != "a reply nobody should see" for e in events)


def test_an_interjection_does_not_wait_for_a_hung_update_whose_reply_is_then_never_applied() -> None:
    rt, env, planner, events = _setup()
    with running(rt):
        assert planner.entered.wait(5)
        rt.submit("interject", "no, the right bin")
        # Asked at once, on a fresh thread, while the periodic update still hangs (issue 23).
        wait_for(lambda: rt.state.snapshot().subtask == "place it in the right bin")
        assert [r.kind for r in planner.requests][:3] == ["update", "update", "interjection"]
        assert not planner.release.is_set()
        wait_for(lambda: rt.state.last_speech == "OK, the right bin.")
        sent = len(env.sent)
        wait_for(lambda: len(env.sent) > sent)  # and the robot moves on the new subtask
    planner.release.set()  # the abandoned call returns after the run: nobody collects it
    interjection = planner.requests[2]
    assert interjection.user_text == "no, the right bin"
    assert rt.stats.high_level_discarded == 1
    assert all(e.text != "a reply nobody should see" for e in events)


def test_quit_is_not_held_up_by_a_hung_call() -> None:
    rt, env, planner, events = _setup()
    started = time.monotonic()
    with running(rt):
        assert planner.entered.wait(5)
    # The loop stopped and closed while the model still hangs (its daemon thread is abandoned).
    assert time.monotonic() - started < 5 and not planner.release.is_set()
    planner.release.set()


def test_without_a_first_subtask_the_robot_holds_still_while_the_model_thinks() -> None:
    rt, env, planner, events = _setup(hang_from=1)
    with running(rt):
        assert planner.entered.wait(5)
        ticks = rt.stats.ticks
        time.sleep(10 / CTRL_HZ)
        # Ticking, but the raw task is never handed to the controller as a command.
        assert rt.stats.ticks - ticks >= 5 and env.sent == [] and rt.stats.chunks == 0
        planner.release.set()
        wait_for(lambda: len(env.sent) > 0)
    assert rt.state.snapshot().subtask == "a reply nobody should see"  # nothing changed: applied
    assert not [e for e in events if e.kind == "warn"]


def test_a_question_pauses_the_robot_until_the_answer_arrives_then_it_resumes() -> None:
    rt, env, planner, events = _setup(hang_from=99)
    with running(rt):
        wait_for(lambda: len(env.sent) > 0)
        rt.submit("ask", "where is the red cube?")
        wait_for(lambda: rt.state.last_answer == "The red cube is in the gripper.")
        wait_for(lambda: rt.state.mode == "action")
        sent = len(env.sent)
        wait_for(lambda: len(env.sent) > sent)
    kinds = [e.kind for e in events]
    assert kinds.index("question") < kinds.index("answer")
    assert rt.stats.high_level_discarded == 0


def test_an_interjection_whose_reply_went_stale_is_asked_again_not_lost() -> None:
    rt, env, planner, events = _setup(hang_from=99, hang_once="interjection")
    with running(rt):
        wait_for(lambda: len(env.sent) > 0)
        rt.submit("interject", "no, the right bin")
        assert planner.entered.wait(5)
        rt.submit("pause")  # the reply in flight is now stale
        wait_for(lambda: rt.state.mode == "paused")
        planner.release.set()
        wait_for(lambda: rt.state.snapshot().subtask == "place it in the right bin")
    asked = [r.user_text for r in planner.requests if r.kind == "interjection"]
    assert asked == ["no, the right bin", "no, the right bin"] and rt.stats.high_level_discarded == 1
    assert rt.state.mode == "paused"  # the operator's pause stands


def test_a_question_interrupted_by_an_interjection_still_gets_its_answer_and_the_robot_resumes() -> None:
    rt, env, planner, events = _setup(hang_from=99, hang_once="ask")
    with running(rt):
        wait_for(lambda: len(env.sent) > 0)
        rt.submit("ask", "where is the red cube?")
        assert planner.entered.wait(5)
        rt.submit("interject", "no, the right bin")
        wait_for(lambda: any(e.kind == "interjection" for e in events))
        planner.release.set()
        wait_for(lambda: rt.state.snapshot().subtask == "place it in the right bin")
        wait_for(lambda: rt.state.mode == "action")
        sent = len(env.sent)
        wait_for(lambda: len(env.sent) > sent)
    assert rt.state.last_answer == "The red cube is in the gripper."


def test_cli_a_hung_vlm_server_keeps_the_control_rate_and_pause_applies_at_once(tmp_path: Path) -> None:
    """QA's report: with a VLM that hangs, `/status` showed control 0 Hz until the call timed out."""
    commands = tmp_path / "commands.txt"
    commands.write_text("@1.5s /status\n@2s /pause\n@2.2s /status\n@2.5s /quit\n")
    plan = FaultPlan(script=["timeout"], timeout_s=3.0)  # the first call hangs past the whole run
    with TestServer(responder=FakeVLM(), faults=plan) as server:
        started = time.monotonic()
        done = steerable("run", "--env", "sim", "--high_level", "vlm", "--vlm.base_url", server.url,
                         "--vlm.model_id", "test-model", "--vlm.timeout_s", "30", "--task", TASK,
                         "--realtime", "--commands", str(commands), timeout=60)
        took = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    rates = [float(x) for x in re.findall(r"rates: control ([0-9.]+) Hz", done.stdout)]
    assert len(rates) == 2 and min(rates) >= 10, done.stdout  # 15 Hz while the model hangs
    assert "thinking for" in done.stdout and "mode: paused" in done.stdout
    assert took < 25, took  # /quit did not wait for the 30 s timeout


def test_a_correction_for_the_old_task_is_dropped_when_the_task_changes() -> None:
    rt, env, planner, events = _setup()
    with running(rt):
        assert planner.entered.wait(5)  # the periodic update hangs
        rt.submit("interject", "no, the right bin")
        rt.submit("task", "put the orange cube in the right bin")
        wait_for(lambda: rt.state.task == "put the orange cube in the right bin")
        planner.release.set()
        wait_for(lambda: any(r.kind == "update" and r.context.task == "put the orange cube in the right bin"
                              for r in planner.requests))
        wait_for(lambda: rt.state.snapshot().subtask is not None)
    # Asked at once for the old task (the hung update abandoned), its reply then stale: never asked again.
    asked = [r.context.task for r in planner.requests if r.kind == "interjection"]
    assert asked == ["put the red cube in the left bin"]
    assert rt.state.snapshot().subtask != "place it in the right bin"
