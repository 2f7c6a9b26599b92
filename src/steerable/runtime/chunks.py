"""Chunk inference for the control loop: when the low level is asked for a chunk, where the call runs,
and how a chunk that lands is fitted to what the robot did meanwhile (`steerable run --inference`).

- `sync`: a chunk is asked for when the queue is empty and the tick waits for it; a slow policy
  stops the robot at every chunk boundary.
- `async`: the call runs beside the loop, so dispatch never waits on it. The next one starts when
  the queue holds no more actions than the measured delay (ticks from asking to landing, the
  longest of the last few) plus one, so it lands before the queue runs dry. A chunk that lands is
  aligned: its first actions were planned for the ticks that passed while it was computed (the
  robot executed the old queue then), so as many as were dispatched meanwhile are dropped, and the
  rest replace the queue.
- `rtc` (real-time chunking): async, and the new chunk continues the motion under way. The next
  call starts `overlap` actions earlier (at most half of what a chunk leaves after the delay), so
  the chunks overlap. A low level that can be guided (`ContinuesChunks`: steerable's flow policy,
  `steerable.policy.rtc`) is given the queued actions as a `ChunkPrefix` with a soft mask (1 on the
  steps that will run during the inference, then decaying to 0 over the overlap); any other is
  blended linearly from the queued actions into its own over the overlap.

A revision bump (a new task, context or mode; an interjection) empties the queue at once
(`RuntimeState`), and a chunk that lands for an older revision is dropped, never dispatched. The
call in flight runs to its end (a model cannot be interrupted halfway); the next chunk, for the
new command, starts as soon as it is over.

A controller that raises `ControllerUnavailableError` (a policy server whose connection dropped)
makes the robot hold still (queue dropped); it is reported once, asked again `RETRY_HZ` times a
second, and when it answers again that is reported and the run goes on.

Clocks: on the wall clock, async and rtc call the controller on one daemon thread, at most one
call in flight; sync calls it inside the tick. On the virtual clock every call runs inside the
tick, so evaluation and tests stay deterministic, and its chunk is held back for the controller's
declared `latency_s` (rounded up to ticks): the delay a wall-clock run would see, without waiting
for it (`steerable.runtime.slowed` makes a controller take at least a given time); a controller
that declares nothing lands in the tick that asked.
"""

from __future__ import annotations

import logging
import math
import queue
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from steerable.control import ActionChunk, ChunkPrefix, ContinuesChunks, LowLevelController, Observation
from steerable.errors import CommandError, ConfigError, ControllerUnavailableError
from steerable.runtime.clock import RateGate
from steerable.runtime.events import EventKind
from steerable.runtime.state import RuntimeState

__all__ = [
    "INFERENCE_MODES",
    "RETRY_HZ",
    "ChunkInference",
    "ChunkStats",
    "InferenceOptions",
    "blend",
    "prefix_weights",
]

logger = logging.getLogger(__name__)

INFERENCE_MODES: tuple[str, ...] = ("sync", "async", "rtc")
SCHEDULES: tuple[str, ...] = ("exp", "linear")
RETRY_HZ = 2.0  # how often a controller that cannot be reached is asked again


@dataclass(frozen=True)
class InferenceOptions:
    """How chunks are inferred (see the module docstring). `overlap`, `max_guidance` and `schedule`
    shape real-time chunking; `min_latency_s` makes every chunk take at least that long (benchmarks
    and tests: "a policy slowed to 200 ms")."""

    mode: str = "sync"
    overlap: int = 16
    max_guidance: float = 5.0
    schedule: str = "exp"
    min_latency_s: float = 0.0

    def __post_init__(self) -> None:
        if self.mode not in INFERENCE_MODES:
            raise ConfigError(f"--inference {self.mode!r}: choose one of {', '.join(INFERENCE_MODES)}")
        if self.schedule not in SCHEDULES:
            raise ConfigError(f"--rtc.schedule {self.schedule!r}: choose one of {', '.join(SCHEDULES)}")
        if self.overlap < 0:
            raise ConfigError(f"--rtc.overlap must be at least 0, got {self.overlap}")
        if not self.max_guidance >= 0:
            raise ConfigError(f"--rtc.max_guidance must be at least 0, got {self.max_guidance:g}")
        if not self.min_latency_s >= 0:
            raise ConfigError(f"a chunk's minimum latency must be at least 0 s, got {self.min_latency_s:g}")


def prefix_weights(length: int, frozen: int, schedule: str = "exp") -> np.ndarray:
    """The soft mask over `length` queued actions: 1 on the first `frozen` (they run while the new
    chunk is computed), then decaying toward 0 at the end of the queue, exponentially (`exp`, as
    the RTC paper) or linearly."""
    frozen = max(0, min(frozen, length))
    i = np.arange(length, dtype=np.float64)
    c = np.clip((length - i) / (length - frozen + 1), 0.0, 1.0)
    w = c * np.expm1(c) / math.expm1(1.0) if schedule == "exp" else c
    w[:frozen] = 1.0
    return w.astype(np.float32)


def blend(queued: np.ndarray, fresh: np.ndarray) -> np.ndarray:
    """`fresh` (a new chunk, aligned to this tick) with its start blended from `queued` (the rest of
    the old one, from this tick on): weight k/(k+1) .. 1/(k+1) on the old over the k overlapping steps."""
    k = min(len(queued), len(fresh))
    out = np.array(fresh, dtype=np.float32, copy=True)
    if k:
        w = ((k - np.arange(k)) / (k + 1)).astype(np.float32)[:, None]
        out[:k] = w * np.asarray(queued[:k], dtype=np.float32) + (1 - w) * out[:k]
    return out


@dataclass
class ChunkRequest:
    """One call: the revision and command it is for, the observation of the tick that asked (loop
    frame `tick`), the actions dispatched before it, and for rtc the prefix it should continue."""

    revision: int
    command: str
    observation: Observation
    tick: int
    dispatched: int
    prefix: ChunkPrefix | None = None
    guided: bool = False
    ready_tick: int = 0  # virtual clock: the first tick its chunk may land


@dataclass(frozen=True)
class ChunkOutcome:
    request: ChunkRequest
    result: ActionChunk | Exception
    seconds: float  # wall time of the call


@dataclass
class ChunkStats:
    """What the chunk inference did: calls, chunks queued or dropped, actions dropped as late, and the
    recent latencies (wall seconds per call) and delays (loop ticks from asking to landing)."""

    started: int = 0
    queued: int = 0  # chunks that went into the queue (each starts a new chunk boundary)
    stale: int = 0  # landed for an older revision: dropped
    late_actions: int = 0  # actions whose tick had passed when their chunk landed
    latencies: deque[float] = field(default_factory=lambda: deque(maxlen=32))
    delays: deque[int] = field(default_factory=lambda: deque(maxlen=8))


class _Worker:
    """One daemon thread making the calls, at most one in flight; results are collected by `poll`."""

    def __init__(self, call: Callable[[ChunkRequest], ChunkOutcome]) -> None:
        self._call = call
        self._requests: queue.SimpleQueue[ChunkRequest | None] = queue.SimpleQueue()
        self._results: queue.SimpleQueue[ChunkOutcome] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    def start(self, request: ChunkRequest) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._serve, name="steerable-chunks", daemon=True)
            self._thread.start()
        self._requests.put(request)

    def poll(self) -> ChunkOutcome | None:
        try:
            return self._results.get_nowait()
        except queue.Empty:
            return None

    def close(self) -> None:
        if self._thread is not None:
            self._requests.put(None)
            self._thread = None

    def _serve(self) -> None:
        while (request := self._requests.get()) is not None:
            self._results.put(self._call(request))


class ChunkInference:
    """The chunk half of `steerable.runtime.loop.Runtime` (see the module docstring): the loop asks
    `wants` / `start` when the robot has work, `land` at every tick, and dispatches from the queue."""

    def __init__(self, low: LowLevelController, state: RuntimeState, options: InferenceOptions, *, ctrl_hz: float,
                 chunk_hz: float, threaded: bool, direct_task: bool, emit: Callable[[EventKind, str], None],
                 every_tick: bool = False, counted: Callable[[], None] = lambda: None) -> None:
        self.low, self.state, self.options = low, state, options
        self.ctrl_hz = ctrl_hz
        self.direct_task = direct_task  # no high level: a controller's "done" ends the task
        # The first direct task the controller refused (it names what the scene lacks), for the loop.
        self.refused: CommandError | None = None
        self.emit = emit
        self.counted = counted  # hears every call that returned a chunk (the loop's measured rates)
        # A controller asked on every tick for that tick's action (a LeRobot policy's select_action,
        # which keeps its own action queue) runs in the tick, whatever the mode.
        self.every_tick = every_tick
        self.sync = options.mode == "sync" or every_tick
        self.guided = options.mode == "rtc" and not every_tick and isinstance(low, ContinuesChunks)
        self.stats = ChunkStats()
        self.unavailable = False  # the controller could not be reached: holding still, asking again
        self._worker = _Worker(self._call) if threaded and not self.sync else None
        self._virtual_ticks = 0 if threaded else math.ceil(float(getattr(low, "latency_s", 0.0)) * ctrl_hz - 1e-9)
        self._in_flight: ChunkRequest | None = None
        self._landed: ChunkOutcome | None = None  # inline call: waiting for its ready tick
        self._gate = RateGate(chunk_hz)
        self._retry = RateGate(RETRY_HZ)
        self._asked_revision = -1
        self._warned_revision = -1
        self._done_pending = -1  # a "done" that came while actions were still queued: applied once they ran
        self._done_command = ""
        self._chunk_len = 0  # actions in the last chunk that landed

    @property
    def in_flight(self) -> bool:
        return self._in_flight is not None

    def delay_ticks(self) -> int:
        """The expected delay of a call in ticks: the longest of the last few (the declared latency on
        the virtual clock before any)."""
        return max(self.stats.delays, default=self._virtual_ticks)

    def overlap_ticks(self) -> int:
        """rtc: how many queued actions past the delay a new chunk continues (`overlap`, at most half
        of what the last chunk left after the delay); 0 otherwise."""
        if self.options.mode != "rtc" or self.sync:
            return 0
        return max(0, min(self.options.overlap, (self._chunk_len - self.delay_ticks() - 1) // 2))

    def lead_ticks(self) -> int:
        """The queue length at which the next call starts (async, rtc): the delay, one tick, and the
        overlap."""
        return self.delay_ticks() + 1 + self.overlap_ticks()

    def _queued(self, revision: int) -> int:
        st = self.state
        return len(st.queue) if st.queue_revision == revision else 0

    def at_boundary(self, revision: int) -> bool:
        """A chunk boundary, where periodic high-level updates go: the queue is empty (sync), or the
        next call is due and none is in flight (async, rtc)."""
        if self.sync:
            return not self.state.queue
        return self._in_flight is None and self._queued(revision) <= self.lead_ticks()

    def wants(self, revision: int, now: float) -> bool:
        """Whether to ask for a chunk now (the robot has work; see the module docstring)."""
        if self._in_flight is not None:
            return False
        if self.unavailable:
            return self._retry.due(now)
        limit = 0 if self.sync else self.lead_ticks()
        if self._queued(revision) > limit:
            return False
        return revision != self._asked_revision or self.every_tick or self._gate.due(now)

    def start(self, revision: int, command: str, observation: Observation, tick: int, now: float) -> None:
        """Ask for a chunk for `command` at `revision` from `observation` (loop frame `tick`)."""
        st = self.state
        self._asked_revision = revision
        self._gate.due(now, force=True)
        request = ChunkRequest(revision, command, observation, tick, st.actions_dispatched,
                               guided=self.guided, ready_tick=tick + self._virtual_ticks)
        if self.guided:
            with st.lock:
                queued = list(st.queue) if st.queue_revision == revision else []
            if queued:
                delay = min(self.delay_ticks(), len(queued))
                weights = prefix_weights(len(queued), delay, self.options.schedule)
                request.prefix = ChunkPrefix(np.stack(queued), weights, delay, self.options.max_guidance)
        self.stats.started += 1
        self._in_flight = request
        if self._worker is not None:
            self._worker.start(request)
        else:
            self._landed = self._call(request)

    def land(self, tick: int) -> None:
        """Apply the chunk that finished, if any (and a "done" whose queue has run out)."""
        outcome: ChunkOutcome | None = None
        if self._worker is not None:
            outcome = self._worker.poll()
        elif self._landed is not None and tick >= self._landed.request.ready_tick:
            outcome, self._landed = self._landed, None
        if outcome is not None:
            self._in_flight = None
            self.stats.delays.append(tick - outcome.request.tick)
            self.stats.latencies.append(outcome.seconds)
            self._apply(outcome)
        st = self.state
        if self._done_pending >= 0:
            if self._done_pending != st.revision:
                self._done_pending = -1
            elif not st.queue:
                self._done_pending = -1
                self._finish(self._done_command)

    def close(self) -> None:
        if self._worker is not None:
            self._worker.close()

    # -- one call and its outcome -------------------------------------------------------------------
    def _call(self, request: ChunkRequest) -> ChunkOutcome:
        started = time.perf_counter()
        result: ActionChunk | Exception
        try:
            if request.prefix is not None and isinstance(self.low, ContinuesChunks):
                result = self.low.act_continuing(request.observation, request.command, request.prefix)
            else:
                result = self.low.act(request.observation, request.command)
        except Exception as exc:  # reported by the loop's thread (`_apply`)
            result = exc
        return ChunkOutcome(request, result, time.perf_counter() - started)

    def _apply(self, outcome: ChunkOutcome) -> None:
        st, request, result = self.state, outcome.request, outcome.result
        if isinstance(result, ControllerUnavailableError):
            with st.lock:
                st.queue.clear()
            if not self.unavailable:
                self.unavailable = True
                self.emit("warn", f"{result}; holding still until it answers again")
            return
        if self.unavailable and not isinstance(result, Exception):
            self.unavailable = False
            self.emit("info", f"{self.low.name} answers again; resuming")
        if isinstance(result, Exception):
            if request.revision != st.revision:
                logger.debug("dropped a failure for revision %d: %s", request.revision, result)
                return
            # The type always: some exceptions carry no message (a bare AssertionError).
            error = f"{type(result).__name__}: {result}" if str(result) else type(result).__name__
            with st.lock:
                st.hold = not self.direct_task
                st.controller_error = error
            self.emit("warn", f"{self.low.name} failed on {request.command!r}: {error}; holding still")
            return
        self.counted()
        chunk = result
        with st.lock:
            if request.revision != st.revision:
                st.chunks_discarded += 1
                self.stats.stale += 1
                return
            if chunk.error:
                st.controller_error = chunk.error
                if chunk.refused and self.direct_task and self.refused is None:
                    self.refused = CommandError(chunk.error)  # no high level to blame: the command itself
            elif chunk.done and len(chunk.actions) == 0:
                self._done_command = request.command
                if st.queue:
                    self._done_pending = request.revision
                else:
                    self._finish(request.command)
        if chunk.error and self._warned_revision != request.revision:
            self._warned_revision = request.revision
            self.emit("warn", f"controller: {chunk.error}; holding still")
        if len(chunk.actions):
            self._queue(np.asarray(chunk.actions, dtype=np.float32), request)

    def _finish(self, command: str) -> None:
        st = self.state
        with st.lock:
            st.controller_done = True
            finished = self.direct_task and not st.done
            if finished:
                st.done = True
        if finished:
            self.emit("done", command)

    def _queue(self, actions: np.ndarray, request: ChunkRequest) -> None:
        """Queue a chunk that landed for the current revision, aligned to this tick (and blended, rtc)."""
        st = self.state
        self._chunk_len = len(actions)
        late = min(st.actions_dispatched - request.dispatched, len(actions))
        self.stats.late_actions += late
        fresh = actions[late:]
        if not len(fresh):  # every action was for a tick already past: the old queue goes on
            return
        if self.options.mode == "rtc" and not self.sync and not request.guided:
            with st.lock:
                queued = list(st.queue) if st.queue_revision == request.revision else []
            if queued:
                fresh = blend(np.stack(queued), fresh)
        if st.enqueue(fresh, request.revision):
            self.stats.queued += 1
