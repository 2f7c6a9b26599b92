"""Runs a high-level model's calls off the control loop: one daemon thread, at most one call in flight.

The loop builds each `HighLevelRequest` itself (observation and prompt come from its thread), hands
it to `HighLevelWorker.start`, and collects the outcome with `poll()` at the start of a later tick,
so a slow or hung model (a VLM up to its timeout) never stops ticks, dispatch, `/pause` or `/quit`.
The loop decides what a finished call is still worth: an outcome computed against an older revision
is discarded, exactly like a stale action chunk. The thread is a daemon: a call still hanging when
the run ends does not keep the process alive.

An interjection does not wait for a periodic update in flight: that call is abandoned (it runs on,
on its thread, and its outcome is never collected) and the interjection is asked at once on a fresh
thread, so the operator's words are acted on within one high-level period even when the model hung
on the update. Other requests made while a call is in flight (a question, an interjection during an
interjection or a question) wait for it.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from steerable.control import (
    HighLevelModel,
    HighLevelRequest,
    HighLevelUpdate,
    LowLevelController,
    Observation,
    RequestKind,
)
from steerable.language.styles import CONTEXT_STYLES
from steerable.runtime.clock import RetryBackoff
from steerable.runtime.events import EventKind, PromptSource
from steerable.runtime.state import RuntimeState
from steerable.tools import ToolRegistry

if TYPE_CHECKING:
    from steerable.runtime.clock import Clock
    from steerable.runtime.rates import LoopStats, RecentEvents

__all__ = ["HighLevelCalls", "HighLevelOutcome", "HighLevelWorker"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class HighLevelOutcome:
    """A finished call: the request it answered and the update, or the exception the model raised."""

    request: HighLevelRequest
    result: HighLevelUpdate | Exception


class HighLevelWorker:
    """A single background thread calling `model.update`; see the module docstring."""

    def __init__(self, model: HighLevelModel) -> None:
        self.model = model
        self._requests: queue.SimpleQueue[HighLevelRequest | None] = queue.SimpleQueue()
        self._results: queue.SimpleQueue[HighLevelOutcome] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self.in_flight: HighLevelRequest | None = None
        self.started_at = 0.0

    @property
    def busy(self) -> bool:
        """A call was started and its outcome not yet collected by `poll()`."""
        return self.in_flight is not None

    def start(self, request: HighLevelRequest, now: float = 0.0) -> None:
        """Start a call; `now` (the loop's clock) is kept as `started_at`."""
        if self.in_flight is not None:
            raise RuntimeError("a high-level call is already in flight")
        if self._thread is None:
            self._thread = threading.Thread(target=self._serve, args=(self._requests, self._results),
                                            name="steerable-high-level", daemon=True)
            self._thread.start()
        self.in_flight, self.started_at = request, now
        self._requests.put(request)

    def poll(self) -> HighLevelOutcome | None:
        """The outcome of the call in flight once it has finished (then the worker is free), else None."""
        try:
            outcome = self._results.get_nowait()
        except queue.Empty:
            return None
        self.in_flight = None
        return outcome

    def close(self) -> None:
        """Let the thread end after the call it may be running (it is not waited for)."""
        if self._thread is not None:
            self._requests.put(None)
            self._thread = None

    def abandon(self) -> HighLevelRequest | None:
        """Give up on the call in flight: it runs on, its outcome is never collected, and the next
        call starts at once on a fresh thread. Returns the abandoned request."""
        request = self.in_flight
        if request is not None:
            self.close()
            self._requests, self._results = queue.SimpleQueue(), queue.SimpleQueue()
            self.in_flight = None
        return request

    def _serve(self, requests: queue.SimpleQueue[HighLevelRequest | None],
               results: queue.SimpleQueue[HighLevelOutcome]) -> None:
        while (request := requests.get()) is not None:
            try:
                result: HighLevelUpdate | Exception = self.model.update(request)
            except Exception as exc:  # reported by the loop, like a failure of a synchronous call
                result = exc
            logger.debug("high-level %s call finished: %s", request.kind, type(result).__name__)
            results.put(HighLevelOutcome(request, result))


class HighLevelCalls:
    """The high-level half of `steerable.runtime.loop.Runtime` (a mixin; see that module's docstring):
    making calls (inline, or on the worker), applying or discarding their replies, dispatching tools."""

    high: HighLevelModel | None
    low: LowLevelController
    state: RuntimeState
    stats: LoopStats
    tools: ToolRegistry
    prompts: PromptSource | None
    clock: Clock
    _recent: RecentEvents
    _worker: HighLevelWorker | None
    _waiting: deque[tuple[RequestKind, str | None]]
    _resume_after_ask: bool
    _reset_high: bool
    _answered: int
    _retry: RetryBackoff

    @property
    def high_level_waiting_s(self) -> float | None:
        """How long the high-level call in flight has been running (loop seconds), or None."""
        if self._worker is None or self._worker.in_flight is None:
            return None
        return max(self.clock.now() - self._worker.started_at, 0.0)

    def emit(self, kind: EventKind, text: str) -> None:
        raise NotImplementedError

    def _observe(self) -> Observation:
        raise NotImplementedError

    def reset_models(self) -> None:
        """Reset the controller and the high level (deferred while a high-level call is in flight)."""
        self.low.reset()
        if self._worker is not None and self._worker.busy:
            self._reset_high = True
        elif self.high is not None:
            self.high.reset()

    # -- high level ---------------------------------------------------------------------------------
    def _high_level(self, kind: RequestKind, user_text: str | None = None) -> None:
        assert self.high is not None
        worker = self._worker
        if worker is not None and worker.in_flight is not None:
            if kind == "interjection" and worker.in_flight.kind == "update":
                worker.abandon()  # the operator's words first (see the module docstring)
                self.stats.high_level_discarded += 1
            else:
                self._waiting.append((kind, user_text))
                return
        if self._reset_high:
            self._reset_high = False
            self.high.reset()
        st = self.state
        obs = self._observe()
        self.stats.high_level_calls += 1
        self._recent.mark("high_level_hz", self.clock.now())
        revision = st.revision
        result: HighLevelUpdate | Exception
        try:
            messages = self.prompts(kind, st, obs, user_text) if self.prompts is not None else []
            request = HighLevelRequest(
                kind=kind,
                context=st.snapshot(),
                observation=obs,
                messages=messages,
                user_text=user_text,
                controller_done=st.controller_done,
                controller_error=st.controller_error,
            )
            if worker is not None:
                worker.start(request, self.clock.now())
                return
            result = self.high.update(request)
        except Exception as exc:
            result = exc
        self._finish_high_level(kind, revision, result)

    def _poll_high_level(self) -> None:
        """Apply the worker's finished call, if any, and start the next waiting request."""
        if self._worker is None:
            return
        outcome = self._worker.poll()
        if outcome is not None:
            asked, st = outcome.request, self.state
            if asked.kind == "interjection" and asked.context.revision != st.revision and asked.context.task == st.task:
                # The operator's words must not be lost with the stale reply: ask again, first in line.
                self._waiting.appendleft(("interjection", asked.user_text))
            self._finish_high_level(asked.kind, asked.context.revision, outcome.result)
        if self._waiting and not self._worker.busy:
            self._high_level(*self._waiting.popleft())

    def _finish_high_level(self, kind: RequestKind, revision: int, result: HighLevelUpdate | Exception) -> None:
        # The robot was paused for a question (real-time): resume once the last question waiting is answered.
        resume = kind == "ask" and self._resume_after_ask and not any(k == "ask" for k, _ in self._waiting)
        self._settle(kind, revision, result)
        if resume:
            self._resume_after_ask = False
            self.state.set_mode("action")

    def _settle(self, kind: RequestKind, revision: int, result: HighLevelUpdate | Exception) -> None:
        assert self.high is not None
        st = self.state
        if revision != st.revision:  # asked before the task/context/mode changed: too late to apply
            self.stats.high_level_discarded += 1
            logger.debug("discarded a %s reply for revision %d (now %d)", kind, revision, st.revision)
            if kind == "ask" and isinstance(result, HighLevelUpdate) and result.answer is not None:
                st.last_answer = result.answer  # an answer is still the answer to the question asked
                self.emit("answer", result.answer)
            elif isinstance(result, Exception) and not st.hold:  # the operator is still told
                self.stats.high_level_failures += 1
                self.emit("warn", f"{self.high.name} failed ({type(result).__name__}: {result})")
            return
        if kind == "update":
            with st.lock:
                # Same context again: let the controller run (and report) the command anew.
                st.controller_done = False
        if isinstance(result, Exception):  # any model failure: hold still, tell the operator, go on
            exc = result
            self.stats.high_level_failures += 1
            self._retry.failed(self.clock.now())
            with st.lock:
                first = not st.hold
                st.hold = True
                st.queue.clear()
            if first or kind != "update":
                self.emit("warn", f"{self.high.name} failed ({type(exc).__name__}: {exc}); holding still")
        else:
            with st.lock:
                st.hold = False
            self._retry.succeeded()
            self._apply_update(result)
        if kind == "update":
            self._answered = st.revision

    def _apply_update(self, update: HighLevelUpdate) -> None:
        st = self.state
        for key in CONTEXT_STYLES:
            value = getattr(update, key)
            if value is not None and st.set_context(key, value):
                self.emit(key, value)
                if key == "subtask" and value and not update.task_done:
                    st.done = False  # e.g. an interjection gave a finished task more to do
        if update.speech:
            self._call_tool("say", {"text": update.speech})
        for call in update.tool_calls:
            self._call_tool(call.name, call.arguments)
        if update.answer is not None:
            st.last_answer = update.answer
            self.emit("answer", update.answer)
        if update.task_done and not st.done:
            with st.lock:
                st.done = True
                st.queue.clear()
            self.emit("done", "task complete")

    def _call_tool(self, name: str, arguments: Any) -> None:
        outcome = self.tools.dispatch(name, arguments)
        if name == "say" and outcome.ok:
            self.state.last_speech = str(arguments["text"])
            self.emit("speech", self.state.last_speech)
        elif not outcome.ok:
            self.emit("warn", outcome.message)
        else:
            self.emit("tool", f"{name}({dict(arguments)})")
