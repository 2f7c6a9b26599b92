"""Runtime core: revisions discard stale chunks, rate gates, interjections, failures, text parsing."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from steerable.control import ActionChunk, HighLevelRequest, HighLevelUpdate, Observation
from steerable.runtime.clock import RateGate, VirtualClock
from steerable.runtime.loop import LoopRates, Runtime, RuntimeEvent
from steerable.runtime.parsing import REPLIES, MemoryReply, SpeechReply, SubtaskReply, split_say
from steerable.runtime.state import RuntimeState
from steerable.tools import SayTool, ToolRegistry


class FakeEnv:
    fps = 10
    action_dim = 2
    state_names = ("a", "b")
    camera_keys = ()

    def __init__(self) -> None:
        self.sent: list[np.ndarray] = []

    def observe(self, *, render: bool = True) -> Observation:
        return Observation(state=np.zeros(2, dtype=np.float32), time_s=len(self.sent) / self.fps)

    def send_action(self, action: np.ndarray) -> None:
        self.sent.append(action)

    def close(self) -> None:
        pass


class CountingController:
    """Returns chunks of 4 actions tagged with the command's length; records every call."""

    name = "counting controller"
    wants_images = False

    def __init__(self) -> None:
        self.calls: list[str] = []

    def act(self, observation: Observation, command: str) -> ActionChunk:
        self.calls.append(command)
        base = float(len(self.calls))
        return ActionChunk(np.array([[base, i] for i in range(4)], dtype=np.float32))

    def reset(self) -> None:
        pass


class RecordingPlanner:
    name = "recording planner"
    wants_images = False

    def __init__(self, replies: list[HighLevelUpdate | Exception] | None = None) -> None:
        self.requests: list[HighLevelRequest] = []
        self.replies = replies or []

    def update(self, request: HighLevelRequest) -> HighLevelUpdate:
        self.requests.append(request)
        if request.kind == "interjection":
            return HighLevelUpdate(subtask="place it in the right bin", speech="OK, the right bin.")
        if request.kind == "ask":
            return HighLevelUpdate(answer="The red cube is in the gripper.")
        reply = self.replies.pop(0) if self.replies else HighLevelUpdate(subtask="pick up the red cube")
        if isinstance(reply, Exception):
            raise reply
        return reply

    def reset(self) -> None:
        pass


def _calls(rt: Runtime) -> list[str]:
    """The commands the runtime's counting controller was asked for."""
    assert isinstance(rt.low, CountingController)
    return rt.low.calls


def _runtime(high: RecordingPlanner | None = None, **kw: Any) -> tuple[Runtime, FakeEnv, list[RuntimeEvent]]:
    env = FakeEnv()
    spoken: list[str] = []
    tools = ToolRegistry([SayTool(on_speech=lambda s: spoken.append(s.text))])
    rt = Runtime(env, CountingController(), high, tools=tools, rates=LoopRates(ctrl_hz=10, chunk_hz=2), **kw)
    events: list[RuntimeEvent] = []
    rt.listeners.append(events.append)
    return rt, env, events


def test_state_changes_bump_revision_and_stale_chunks_are_discarded() -> None:
    st = RuntimeState()
    st.set_task("clean")
    st.set_mode("action")
    rev = st.revision
    assert not st.set_context("subtask", None)  # no change, no bump
    assert st.revision == rev
    assert st.enqueue(np.zeros((3, 2)), rev)
    assert st.set_context("subtask", "wipe")
    assert st.revision == rev + 1 and not st.queue  # the queued chunk went with the old prompt
    assert not st.enqueue(np.zeros((3, 2)), rev)  # computed against the old revision: discarded
    assert st.chunks_discarded == 1
    assert st.set_mode("paused") and st.pop_action() is None


def test_a_chunk_in_flight_when_the_task_changes_is_never_executed() -> None:
    entered, release = threading.Event(), threading.Event()

    class Blocking(CountingController):
        def act(self, observation: Observation, command: str) -> ActionChunk:
            if not self.calls:
                entered.set()
                release.wait(5)
            return super().act(observation, command)

    env = FakeEnv()
    rt = Runtime(env, Blocking(), None, rates=LoopRates(ctrl_hz=10))
    rt.submit("task", "old task")
    worker = threading.Thread(target=rt.tick)
    worker.start()
    assert entered.wait(5)
    rt.state.set_task("new task")  # the operator, from another thread, mid-inference
    release.set()
    worker.join(5)
    assert env.sent == [] and not rt.state.queue and rt.state.chunks_discarded == 1
    rt.tick()  # the next tick infers against the new task
    assert _calls(rt)[-1] == "new task" and len(env.sent) == 1


def test_rate_gate_fires_at_most_hz_times_per_second_and_rearms() -> None:
    gate = RateGate(2.0)
    clock = VirtualClock(10)
    fired = []
    for _ in range(30):  # 3 s at 10 Hz
        if gate.due(clock.now()):
            fired.append(round(clock.now(), 2))
        clock.wait_next()
    assert fired == [0.0, 0.5, 1.0, 1.5, 2.0, 2.5]
    gate.rearm()
    assert gate.due(clock.now())


def test_loop_dispatches_one_action_per_tick_and_infers_at_chunk_boundaries() -> None:
    rt, env, _ = _runtime()
    rt.submit("task", "wave")
    rt.run(max_ticks=20)
    # Chunks of 4 at 10 Hz with chunk_hz=2: a new chunk every 5 ticks (the gate, not the empty queue,
    # decides), one action per tick, and the fifth tick of each period holds still.
    assert len(_calls(rt)) == 4
    assert len(env.sent) == 16
    assert [float(a[0]) for a in env.sent[:6]] == [1, 1, 1, 1, 2, 2]
    assert rt.measured_rates()["chunk_hz"] == pytest.approx(2.0)


def test_high_level_rate_gate_limits_updates() -> None:
    planner = RecordingPlanner()
    rt, _, _ = _runtime(planner)
    rt.submit("task", "tidy")
    rt.run(max_ticks=50)  # 5 s at 10 Hz, high level at 1 Hz
    updates = [r for r in planner.requests if r.kind == "update"]
    assert 4 <= len(updates) <= 6


def test_interjection_reaches_the_model_changes_the_subtask_and_is_spoken() -> None:
    planner = RecordingPlanner()
    rt, env, events = _runtime(planner)
    rt.submit("task", "put the red cube in the left bin")
    rt.run(max_ticks=3)
    assert rt.state.context["subtask"] == "pick up the red cube"
    rt.submit("interject", "no, the right bin")
    rt.tick()
    kinds = [(e.kind, e.text) for e in events if e.frame == 3]
    assert ("interjection", "no, the right bin") in kinds
    assert ("subtask", "place it in the right bin") in kinds and ("speech", "OK, the right bin.") in kinds
    assert planner.requests[-1].kind == "interjection" and planner.requests[-1].user_text == "no, the right bin"
    assert _calls(rt)[-1] == "place it in the right bin"
    assert rt.state.last_speech == "OK, the right bin."


def test_operator_mistakes_are_told_and_the_loop_goes_on() -> None:
    rt, env, events = _runtime(RecordingPlanner())
    rt.submit("interject", "hello?")  # no task yet
    rt.submit("task", "   ")  # empty task
    rt.submit("ask", "")
    rt.run(max_ticks=2)
    warnings = [e.text for e in events if e.kind == "warn"]
    assert any("no task yet" in w for w in warnings)
    assert any("empty task" in w for w in warnings)
    assert any("usage: /ask" in w for w in warnings)
    assert env.sent == []


def test_a_failing_high_level_model_holds_the_robot_still_and_recovers() -> None:
    planner = RecordingPlanner([TimeoutError("no reply in 5 s"), TimeoutError("again")])
    rt, env, events = _runtime(planner)
    rt.submit("task", "tidy")
    rt.run(max_ticks=29)  # fails at 0 s, then at 1 s (one period later), waits 2 s: not asked yet
    assert rt.stats.high_level_calls == 2 and "subtask" not in rt.state.context and not env.sent
    rt.run(max_ticks=6)  # answers at 3 s
    warnings = [e for e in events if e.kind == "warn"]
    assert len(warnings) == 1 and "TimeoutError" in warnings[0].text and "holding still" in warnings[0].text
    assert rt.frame - len(env.sent) >= 30  # nothing moved before the model answered
    assert rt.state.context["subtask"] == "pick up the red cube" and len(env.sent) > 0
    assert rt.stats.high_level_calls == 3


def test_ask_pauses_answers_and_resumes() -> None:
    planner = RecordingPlanner()
    rt, env, events = _runtime(planner)
    rt.submit("task", "tidy")
    rt.run(max_ticks=2)
    rt.submit("ask", "where is the red cube?")
    rt.tick()
    assert [e.text for e in events if e.kind == "answer"] == ["The red cube is in the gripper."]
    assert rt.state.mode == "action"


def test_tool_calls_from_the_model_are_validated() -> None:
    from steerable.control import ToolCall

    planner = RecordingPlanner([HighLevelUpdate(subtask="x", tool_calls=(ToolCall("launch", {}), ToolCall("say", {})))])
    rt, _, events = _runtime(planner)
    rt.submit("task", "tidy")
    rt.tick()
    warnings = [e.text for e in events if e.kind == "warn"]
    assert any("no tool named 'launch'" in w for w in warnings)
    assert any("'text' is a required property" in w for w in warnings)
    assert rt.state.context["subtask"] == "x"  # the rest of the update still applies


def test_split_say_and_reply_models() -> None:
    assert split_say("turn left now <say>heading left</say>") == ("turn left now", ["heading left"])
    assert split_say("< SAY >'ok'</say>") == ("", ["ok"])
    update = SubtaskReply(subtask="pick up the red cube <say>Starting now.</say>",
                          plan="1. pick up the red cube\n2. place it in the bin").update()
    assert update == HighLevelUpdate(subtask="pick up the red cube", plan="1. pick up the red cube\n2. place it in "
                                     "the bin", speech="Starting now.")
    assert SubtaskReply(subtask="", task_done=True).update() == HighLevelUpdate(subtask="", task_done=True)
    spoken = SpeechReply(speech="OK <say>the right bin</say>", subtask="place it in the right bin").update()
    assert spoken.speech == "the right bin OK" and spoken.subtask == "place it in the right bin"
    assert spoken.plan is None  # left out: the plan is kept
    assert MemoryReply(memory="").update() == HighLevelUpdate(memory="")  # "" clears the memory


def test_replies_that_say_nothing_usable_are_refused() -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="empty subtask"):
        SubtaskReply(subtask="<say>hello</say>")
    with pytest.raises(ValidationError):
        MemoryReply.model_validate({"memory": "x", "mood": "happy"})  # the schema allows no other key
    with pytest.raises(ValidationError):
        SubtaskReply.model_validate({"plan": "1. wave"})


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(sorted(REPLIES)), st.dictionaries(
    st.sampled_from(["subtask", "plan", "memory", "speech", "answer", "task_done", "mood"]),
    st.text(alphabet=st.characters(codec="utf-8"), max_size=60) | st.booleans() | st.none() | st.integers()))
def test_any_json_reply_is_read_or_refused_cleanly(purpose: str, data: dict[str, object]) -> None:
    from pydantic import ValidationError

    try:
        update = REPLIES[purpose].model_validate(data).update()  # type: ignore[index]
    except ValidationError:
        return
    for value in (update.subtask, update.plan, update.memory, update.speech, update.answer):
        assert value is None or isinstance(value, str)


def test_model_text_is_printed_without_terminal_control_characters() -> None:
    from steerable.runtime.session import format_event

    line = format_event(RuntimeEvent("subtask", "pick\x1b[2J up\nthe cube\x07", 3, 0.2))
    assert line == "[   0.2s] subtask: pick\ufffd[2J up | the cube\ufffd"


def test_an_interjection_after_the_task_is_done_can_give_it_more_to_do() -> None:
    planner = RecordingPlanner([HighLevelUpdate(subtask="", task_done=True)])
    rt, env, events = _runtime(planner)
    rt.submit("task", "tidy")
    rt.run(max_ticks=3)
    assert rt.state.done and rt.idle and env.sent == []
    rt.submit("interject", "also put the red cube in the right bin")
    rt.run(max_ticks=2)
    assert not rt.state.done and rt.state.context["subtask"] == "place it in the right bin" and env.sent


def test_measured_rates_cover_the_recent_window() -> None:
    rt, _, _ = _runtime(RecordingPlanner([HighLevelUpdate(subtask="wave")]))
    rt.submit("task", "wave")
    rt.run(max_ticks=20)  # 2 s: chunks at 2 Hz
    assert rt.measured_rates()["chunk_hz"] == pytest.approx(2.0)
    rt.submit("pause")
    rt.run(max_ticks=60)  # 6 s paused: the last 5 s saw ticks but no inference
    rates = rt.measured_rates()
    assert rates["chunk_hz"] == 0.0 and rates["ctrl_hz"] == pytest.approx(10.0)


class AlwaysDoneController:
    """Reports every command finished at once (nothing to do), like a controller whose goal already holds."""

    name = "always-done controller"
    wants_images = False

    def act(self, observation: Observation, command: str) -> ActionChunk:
        return ActionChunk(np.zeros((0, 2), dtype=np.float32), done=True)

    def reset(self) -> None:
        pass


class SameSubtaskPlanner:
    """A high level that answers every update with the command just finished (a model stuck on it)."""

    name = "same-subtask planner"
    wants_images = False

    def __init__(self) -> None:
        self.calls = 0

    def update(self, request: HighLevelRequest) -> HighLevelUpdate:
        self.calls += 1
        return HighLevelUpdate(subtask="pick up the red cube")

    def reset(self) -> None:
        pass


def test_a_high_level_that_repeats_a_finished_command_is_asked_at_its_rate_not_every_tick() -> None:
    planner = SameSubtaskPlanner()
    rt = Runtime(FakeEnv(), AlwaysDoneController(), planner, rates=LoopRates(ctrl_hz=10, chunk_hz=10, high_level_hz=1))
    rt.submit("task", "tidy up")
    rt.run(max_ticks=100)  # 10 s of loop time
    # One call for the first subtask, one forced by the first "done", then about one a second.
    assert 3 <= planner.calls <= 14
