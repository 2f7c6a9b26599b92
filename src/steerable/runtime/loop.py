"""The control loop: operator input, high-level updates, chunk inference and action dispatch.

Each tick (one control period) runs, in order:
1. operator input queued since the last tick (task, interjection, question, pause/resume);
2. a high-level update when due: at `high_level_hz`, at a chunk boundary (empty queue), or at once
   when the controller finished its command or the context is empty (such updates at most
   `chunk_hz` times per second);
3. chunk inference when the queue is empty and the chunk gate (`chunk_hz`) is due, or at once after
   the context changed; the chunk is discarded if the revision moved during inference. A controller
   with `every_tick = True` (a LeRobot policy: its `select_action` keeps its own action queue and
   observation history) is asked on every tick instead, for that tick's action. When and where the
   call runs is `steerable.runtime.chunks` (`--inference sync|async|rtc`: in the tick, or beside the
   loop with the next chunk started early, aligned to the ticks that passed and, for rtc, continuing
   the motion under way; there the "chunk boundary" of step 2 is when the next call is due);
4. dispatch of one action (nothing when the queue is empty: the robot holds still);
5. frame hooks (recording) with the tick's observation and action.
A failing high-level model (garbage, timeout) is reported, the queue is dropped and the robot holds
still until an update succeeds; the loop goes on. While it keeps failing it is asked again after
one high-level period, then twice as long each time, at most every `RETRY_MAX_S` seconds: a model
that never answers well (a dead server, a policy whose text never ends) costs a few calls a
minute, not one per period.

With the real-time clock (`realtime=True`: the REPL, `--realtime`) high-level calls run on a
background thread (`steerable.runtime.high_level`), at most one in flight: ticks, dispatch, pause and
quit go on while the model thinks, and its reply is applied at the start of the first tick after it
arrived. A reply computed against an older revision (task, context or mode changed meanwhile; an
interjection bumps the revision) is discarded like a stale chunk; requests made while a call is in
flight (interjections, questions) wait for it. With the virtual clock every call is made inside the
tick, so scripted runs, tests and evaluation stay deterministic.

The work is bounded per second of the loop's clock (simulated, with the virtual clock), whatever
the models answer: high-level updates at most `high_level_hz + chunk_hz` per second (plus one per
operator input), chunk inferences at most `chunk_hz` plus one per context change (an `every_tick`
controller: one call per tick, its model running as its own queue decides). A weak policy
whose controller never reports done, or whose high level rewrites the subtask on every call, costs
no more per simulated second than a good one (`tests/test_eval_cost.py`).
"""

from __future__ import annotations

import logging
import queue
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from steerable.control import (
    Body,
    HighLevelModel,
    HighLevelUpdate,
    LowLevelController,
    Observation,
    RequestKind,
)
from steerable.errors import CommandError
from steerable.runtime.chunks import ChunkInference, InferenceOptions
from steerable.runtime.clock import Clock, RateGate, RetryBackoff, VirtualClock, WallClock
from steerable.runtime.events import EventKind, PromptSource, RuntimeEvent
from steerable.runtime.high_level import HighLevelCalls, HighLevelWorker
from steerable.runtime.rates import LoopRates, LoopStats, RecentEvents
from steerable.runtime.slowed import slowed_to
from steerable.runtime.state import RuntimeState
from steerable.tools import ToolRegistry

__all__ = ["RETRY_MAX_S", "EventKind", "LoopRates", "OperatorInput", "PromptSource", "Runtime", "RuntimeEvent"]

logger = logging.getLogger(__name__)

# The longest wait between tries of a high-level model that keeps failing (seconds of loop time).
RETRY_MAX_S = 5.0

InputKind = Literal["task", "interject", "ask", "pause", "resume", "reset"]


@dataclass(frozen=True)
class OperatorInput:
    kind: InputKind
    text: str = ""
    frame: int = 0  # the loop's tick when it was received


class Runtime(HighLevelCalls):
    """Runs `low` (and `high`, when given: the hierarchical adapter; None: direct-task) on `env`."""

    def __init__(
        self,
        env: Body,
        low: LowLevelController,
        high: HighLevelModel | None = None,
        *,
        tools: ToolRegistry | None = None,
        prompts: PromptSource | None = None,
        rates: LoopRates = LoopRates(),  # noqa: B008  # frozen
        realtime: bool = False,
        render: bool | None = None,
        on_reset: Callable[[str], None] | None = None,
        keep_timings: bool = False,
        inference: InferenceOptions = InferenceOptions(),  # noqa: B008  # frozen
    ) -> None:
        if inference.min_latency_s > 0:
            low = slowed_to(low, inference.min_latency_s, sleep=realtime)
        self.env, self.low, self.high = env, low, high
        self.tools = tools or ToolRegistry()
        self.prompts = prompts
        self.rates = rates
        self.clock: Clock = WallClock(rates.ctrl_hz) if realtime else VirtualClock(rates.ctrl_hz)
        wants = [getattr(m, "wants_images", True) for m in (low, high) if m is not None]
        self._every_tick = bool(getattr(low, "every_tick", False))
        self.render = any(wants) if render is None else render
        self.state = RuntimeState()
        self.stats = LoopStats()
        self.frame = 0
        self.on_reset = on_reset
        self.keep_timings = keep_timings
        self.listeners: list[Callable[[RuntimeEvent], None]] = []
        self.frame_hooks: list[Callable[[Observation, np.ndarray], None]] = []
        self._inputs: queue.SimpleQueue[OperatorInput] = queue.SimpleQueue()
        self.inference = inference
        self.chunks = ChunkInference(
            low, self.state, inference, ctrl_hz=rates.ctrl_hz, chunk_hz=rates.chunk_hz, threaded=realtime,
            direct_task=high is None, every_tick=self._every_tick, emit=self.emit, counted=self._counted)
        self._high_gate = RateGate(rates.high_level_hz)
        # Updates asked "at once" (the command finished, no subtask yet) are still bounded: at most
        # chunk_hz per second, so a controller that reports every command done at once cannot make
        # the high level run on every tick.
        self._forced_gate = RateGate(rates.chunk_hz)
        self._retry = RetryBackoff(1.0 / max(rates.high_level_hz, 1e-6), RETRY_MAX_S)
        self._answered = -1  # revision after the last high-level update
        self._done_forced: tuple[int, Any] | None = None  # (revision, subtask) of the last done-forced update
        # realtime: calls run on a worker thread; requests made while it is busy wait in `_waiting`
        self._worker = HighLevelWorker(high) if high is not None and realtime else None
        self._waiting: deque[tuple[RequestKind, str | None]] = deque()
        self._resume_after_ask = False
        self._questions: deque[int] = deque()  # the ticks of the questions asked and not answered yet, in order
        self._answering: int | None = None  # the tick of the question whose reply is being applied
        self._task_frame = 0  # the tick the current task was applied at
        # The first operator line the high level could not carry out in this scene (a task naming an
        # object it lacks): a commands file stops on it (`Session.run_commands`); the REPL only warns.
        self._refused: CommandError | None = None
        self._reset_high = False  # reset the high level once its call in flight is over
        self._obs: Observation | None = None
        self._recent = RecentEvents()

    @property
    def refused(self) -> CommandError | None:
        """The first line this scene cannot carry out: refused by the high level, or, without one, by
        the controller the task went to directly."""
        return self._refused or self.chunks.refused

    # -- operator API (thread-safe: applied at the start of the next tick) ----------------------
    def submit(self, kind: InputKind, text: str = "") -> None:
        self._inputs.put(OperatorInput(kind, text, self.frame))

    @property
    def pending_inputs(self) -> bool:
        return not self._inputs.empty()

    @property
    def idle(self) -> bool:
        """No work left: paused, no task, task done, or a command the controller cannot run."""
        st = self.state
        with st.lock:
            thinking = self._worker is not None and (self._worker.busy or bool(self._waiting))
            return not st.queue and (not st.busy or st.hold) and not thinking

    # -- events --------------------------------------------------------------------------------
    def emit(self, kind: EventKind, text: str, frame: int | None = None) -> None:
        """Tell the listeners, at `frame` (default: this tick)."""
        at = self.frame if frame is None else frame
        asked = self._answering if kind == "answer" else None
        event = RuntimeEvent(kind, text, at, at / self.rates.ctrl_hz, asked)
        logger.debug("%s %s: %s", event.frame, kind, text)
        for listener in self.listeners:
            listener(event)

    def _observe(self) -> Observation:
        if self._obs is None:
            self._obs = self.env.observe(render=self.render)
        return self._obs

    # -- operator input ----------------------------------------------------------------------------
    def _apply_input(self, op: OperatorInput) -> None:
        st = self.state
        text = op.text.strip()
        if op.kind in ("task", "pause", "resume", "reset"):
            self._resume_after_ask = False  # the operator decides the mode now
        if op.kind in ("task", "reset"):  # corrections still waiting were meant for the old task
            self._waiting = deque(w for w in self._waiting if w[0] != "interjection")
        if op.kind == "task":
            if not text:
                self.emit("warn", "empty task: say what to do, e.g. /task put the red cube in the blue bin")
                return
            st.set_task(text)
            self.reset_models()
            st.set_mode("action")
            self._task_frame = self.frame
            self._high_gate.rearm()
            self._forced_gate.rearm()  # a new task is answered at once
            self._retry.rearm()
            self.emit("task", text)
        elif op.kind == "pause":
            if st.set_mode("paused"):
                self.emit("mode", "paused: robot holding still")
        elif op.kind == "resume":
            if not st.task:
                self.emit("warn", "no task to resume: set one with /task <what to do>")
            elif st.set_mode("action"):
                self.emit("mode", "resumed")
        elif op.kind == "reset":
            if self.on_reset is not None:
                self.on_reset(text)
        elif op.kind in ("interject", "ask"):
            # Stamped when received (a tick busy when it came applies it at the next), never before
            # the task it is about.
            received = max(min(op.frame, self.frame), self._task_frame)
            if op.kind == "interject":
                self._interject(text, received)
            else:
                self._ask(text, received)

    def _interject(self, text: str, received: int) -> None:
        st = self.state
        if not text:
            return
        if not st.task:
            self.emit("warn", "no task yet: set one with /task <what to do> before correcting the robot")
            return
        self.emit("interjection", text, received)
        if self.high is None:  # direct-task: the operator's words are the command
            with st.lock:
                st.done = False
                st.set_context("subtask", text)
            self.emit("subtask", text)
            return
        if self._worker is not None:
            st.invalidate()  # a reply in flight was computed without these words: discard it
        self._high_level("interjection", text)

    def _ask(self, question: str, received: int) -> None:
        st = self.state
        if not question:
            self.emit("warn", "usage: /ask <question about the scene>")
            return
        if self.high is None:
            self.emit("warn", "no high-level model to answer questions (run with --high_level)")
            return
        self.emit("question", question, received)
        self._questions.append(received)
        was = st.mode
        st.set_mode("paused")  # the policy is free, and any chunk in flight is invalidated
        if self._worker is not None:  # resumed when the answer arrives
            self._resume_after_ask = self._resume_after_ask or was == "action"
            self._high_level("ask", question)
            return
        self._high_level("ask", question)
        st.set_mode(was)

    def _finish_high_level(self, kind: RequestKind, revision: int, result: HighLevelUpdate | Exception) -> None:
        # Every question's call ends here once, in the order asked, in the tick (sync) or ticks later
        # (a model beside the loop): its answer names the question's tick either way.
        self._answering = self._questions.popleft() if kind == "ask" and self._questions else None
        if isinstance(result, CommandError) and self._refused is None:
            self._refused = result
        try:
            super()._finish_high_level(kind, revision, result)
        finally:
            self._answering = None

    # -- one tick -------------------------------------------------------------------------------------
    def tick(self) -> None:
        started = time.perf_counter()
        now = self.clock.now()
        self._obs = None
        st = self.state
        while not self._inputs.empty():
            self._apply_input(self._inputs.get())
        self._poll_high_level()
        recording = bool(self.frame_hooks)
        obs = self._observe() if recording else None

        self.chunks.land(self.frame)
        thinking = self._worker is not None and self._worker.busy
        if self.high is not None and st.mode == "action" and st.task and not st.done and not thinking:
            if st.hold:  # the last call failed: retry at the high-level rate, backing off
                due = self._retry.due(now) and self._high_gate.due(now)
            elif st.controller_done and self._done_forced == (st.revision, st.context.get("subtask")):
                # The last "done" update gave back the command just finished: ask again at the
                # high-level rate, not on every tick.
                due = self._high_gate.due(now)
            elif st.controller_done or ("subtask" not in st.context and self._answered != st.revision):
                due = self._forced_gate.due(now) and self._high_gate.due(now, force=True)
                if due and st.controller_done:
                    self._done_forced = (st.revision, st.context.get("subtask"))
            else:  # periodic, at chunk boundaries only
                due = self.chunks.at_boundary(st.revision) and self._high_gate.due(now)
            if due:
                self._high_level("update")

        revision = st.revision
        # Hold still rather than run a command the high level is rewriting: no subtask yet (not the
        # raw task), or an interjection being answered (the operator's words void the command).
        asked = self._worker.in_flight if self._worker is not None else None
        first = asked is not None and ("subtask" not in st.context or asked.kind == "interjection")
        if st.busy and not st.hold and not st.controller_done and not first and self.chunks.wants(revision, now):
            self.chunks.start(revision, st.snapshot().command, self._observe(), self.frame, now)
            self.chunks.land(self.frame)  # in the tick (sync, or no latency to simulate): queued now

        action = st.pop_action()
        if action is not None:
            self.env.send_action(action)
            # An environment that executes something else (a robot's per-step bound) says what it sent.
            executed = getattr(self.env, "last_sent", None)
            action = action if executed is None else np.asarray(executed, dtype=np.float32)
        if recording:
            assert obs is not None
            done = action if action is not None else obs.state.astype(np.float32)
            for hook in self.frame_hooks:
                hook(obs, done)
        self.frame += 1
        self.stats.ticks += 1
        self._recent.mark("ctrl_hz", now)
        if self.keep_timings:
            self.stats.tick_seconds.append(time.perf_counter() - started)

    def _counted(self) -> None:
        self.stats.chunks += 1
        self._recent.mark("chunk_hz", self.clock.now())

    # -- running -------------------------------------------------------------------------------------
    def run(self, *, until: Callable[[], bool] | None = None, max_ticks: int | None = None) -> None:
        """Tick until `until()` is true, `max_ticks` more ticks ran, or KeyboardInterrupt (re-raised
        after the robot is stopped: paused, queue dropped)."""
        end = None if max_ticks is None else self.stats.ticks + max_ticks
        try:
            while (end is None or self.stats.ticks < end) and not (until is not None and until()):
                self.tick()
                late = self.clock.wait_next()
                if self.keep_timings:
                    self.stats.lateness.append(late)
        except KeyboardInterrupt:
            self.stop()
            raise

    def stop(self) -> None:
        """Stop the robot now: paused, nothing queued."""
        self.state.set_mode("paused")

    def close(self) -> None:
        """Stop the robot and let the high-level thread end (a call still hanging is not waited for)."""
        self.stop()
        self.chunks.close()
        if self._worker is not None:
            self._worker.close()

    def measured_rates(self, window_s: float = 5.0) -> dict[str, float]:
        """Ticks, chunk inferences and high-level calls per second over the last `window_s` of loop
        time (simulated or wall)."""
        return self._recent.rates(self.clock.now(), window_s)
