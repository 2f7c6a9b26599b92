"""Chunk inference off the control loop (issue 23): async chunks aligned to the ticks that passed,
real-time chunking (a prefix for a guided low level, a blend for any other), cancellation on a
revision bump, a lost controller, and an interjection during a hung high-level call.

Most runs use the virtual clock, where a slow controller's latency is simulated in ticks (so they
are exact and fast); two use the wall clock and a controller that really sleeps.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from runtime_helpers import RecordingEnv, running
from steerable.control import (
    ActionChunk,
    ChunkPrefix,
    HighLevelRequest,
    HighLevelUpdate,
    LowLevelController,
    Observation,
)
from steerable.errors import ConfigError, ControllerUnavailableError
from steerable.runtime.chunks import InferenceOptions, blend, prefix_weights
from steerable.runtime.loop import LoopRates, Runtime, RuntimeEvent
from steerable.tools import SayTool, ToolRegistry

HZ = 10


class ClockController:
    """Plans action k + i for the i-th step after the k actions executed so far (plus a per-chunk
    offset, when `offsets` is set): a chunk dispatched in step with the robot's time has sent[j] == j."""

    name = "clock controller"
    wants_images = False

    def __init__(self, n: int = 6, offsets: float = 0.0, seed: int = 0) -> None:
        self.n, self.offsets = n, offsets
        self.rng = np.random.default_rng(seed)
        self.calls: list[tuple[str, int]] = []

    def act(self, observation: Observation, command: str) -> ActionChunk:
        k = int(round(observation.time_s * HZ))
        self.calls.append((command, k))
        offset = self.rng.uniform(-self.offsets, self.offsets) if self.offsets else 0.0
        values = np.arange(k, k + self.n, dtype=np.float32) + offset
        return ActionChunk(np.stack([values, values], axis=1))

    def reset(self) -> None:
        pass


class GuidedClockController(ClockController):
    """A low level that continues chunks: records each prefix it was given."""

    def __init__(self, n: int = 12) -> None:
        super().__init__(n)
        self.prefixes: list[ChunkPrefix] = []

    def act_continuing(self, observation: Observation, command: str, prefix: ChunkPrefix) -> ActionChunk:
        self.prefixes.append(prefix)
        return self.act(observation, command)


def _run(low: LowLevelController, mode: str, ticks: int = 60, latency_s: float = 0.2, **opts: Any
         ) -> tuple[Runtime, RecordingEnv]:
    env = RecordingEnv(HZ)
    rt = Runtime(env, low, None, rates=LoopRates(ctrl_hz=HZ, chunk_hz=HZ),
                 inference=InferenceOptions(mode, min_latency_s=latency_s, **opts))
    rt.submit("task", "wave")
    rt.run(max_ticks=ticks)
    return rt, env


def _values(env: RecordingEnv) -> np.ndarray:
    return np.array([float(a[0]) for a in env.sent])


def test_prefix_weights_are_one_on_the_delay_then_decay_and_the_blend_joins_the_old_chunk() -> None:
    w = prefix_weights(8, 3)
    assert w[:3].tolist() == [1, 1, 1] and np.all(np.diff(w[3:]) < 0) and 0 < w[-1] < 0.2
    assert prefix_weights(4, 0, "linear").tolist() == pytest.approx([0.8, 0.6, 0.4, 0.2])
    out = blend(np.zeros((3, 1)), np.ones((5, 1)))
    assert out[:, 0].tolist() == pytest.approx([0.25, 0.5, 0.75, 1, 1])
    with pytest.raises(ConfigError, match="--inference"):
        InferenceOptions("later")


def test_async_chunks_are_aligned_to_the_ticks_that_passed_and_the_queue_never_runs_dry() -> None:
    rt, env = _run(ClockController(), "async")
    values = _values(env)
    # Each chunk's first actions were for ticks already past: dropped, so sent[j] == j throughout.
    assert values.tolist() == list(range(len(values)))
    # The latency is 2 ticks (0.2 s at 10 Hz): the first action after 2 ticks, then one every tick.
    assert len(values) == 58 and rt.chunks.stats.late_actions > 0
    assert rt.chunks.lead_ticks() == 3  # the measured delay (2 ticks) plus one

    sync, env_sync = _run(ClockController(), "sync")
    assert _values(env_sync).tolist() == list(range(len(env_sync.sent)))  # nothing to drop: the robot waited
    assert len(env_sync.sent) <= 46  # 2 dry ticks at every chunk of 6
    assert sync.chunks.stats.late_actions == 0


def test_without_latency_async_on_the_virtual_clock_dispatches_as_sync() -> None:
    _, env_sync = _run(ClockController(), "sync", latency_s=0.0, ticks=30)
    _, env_async = _run(ClockController(), "async", latency_s=0.0, ticks=30)
    assert _values(env_async).tolist() == _values(env_sync).tolist() == list(range(30))


def test_rtc_blends_a_low_level_that_cannot_be_guided_over_the_overlap() -> None:
    def boundary_jumps(mode: str) -> float:
        rt, env = _run(ClockController(n=16, offsets=2.0, seed=1), mode, ticks=120)
        steps = np.diff(_values(env)) - 1.0  # 0 where the motion goes on as planned
        return float(np.abs(steps).max())

    async_jump, rtc_jump = boundary_jumps("async"), boundary_jumps("rtc")
    assert rtc_jump < 0.5 * async_jump, (rtc_jump, async_jump)


def test_rtc_gives_a_guided_low_level_the_queued_actions_with_the_delay_frozen() -> None:
    low = GuidedClockController(n=12)
    rt, env = _run(low, "rtc", ticks=60)
    assert low.prefixes, "never asked to continue a chunk"
    for prefix in low.prefixes:
        assert prefix.delay == 2 and prefix.weights[:2].tolist() == [1, 1] and prefix.max_guidance == 5.0
        assert len(prefix.actions) == len(prefix.weights) == rt.chunks.lead_ticks()
    assert len(low.prefixes[-1].actions) == 2 + 1 + 4  # the delay, a tick, and at most half of 12 - 2 - 1
    assert _values(env).tolist() == list(range(len(env.sent)))  # still aligned


def test_a_chunk_in_flight_for_the_old_command_is_dropped_and_the_new_one_follows_at_once() -> None:
    env, low = RecordingEnv(HZ), ClockController()
    rt = Runtime(env, low, None, rates=LoopRates(ctrl_hz=HZ, chunk_hz=HZ),
                 inference=InferenceOptions("async", min_latency_s=0.3))
    rt.submit("task", "wave")
    rt.run(max_ticks=10)
    assert rt.chunks.in_flight
    in_flight = len(low.calls)
    rt.submit("task", "bow")  # the revision moves while a "wave" chunk is being computed
    before = len(env.sent)
    rt.run(max_ticks=1)
    assert len(env.sent) == before and not rt.state.queue  # the queue went at once: nothing more of "wave"
    rt.run(max_ticks=8)
    assert rt.chunks.stats.stale == 1 and rt.state.chunks_discarded == 1
    assert low.calls[in_flight][0] == "bow"  # the very next call is for the new command
    assert len(env.sent) > before


class Flaky(ClockController):
    """Unreachable between calls `down` and `up` (a policy server that died and came back)."""

    def __init__(self, down: int, up: int) -> None:
        super().__init__()
        self.down, self.up, self.asked = down, up, 0

    def act(self, observation: Observation, command: str) -> ActionChunk:
        self.asked += 1
        if self.down <= self.asked < self.up:
            raise ControllerUnavailableError("policy server 127.0.0.1:1 lost (connection closed)")
        return super().act(observation, command)


def test_a_lost_controller_holds_still_is_reported_once_and_the_run_resumes() -> None:
    env, low = RecordingEnv(HZ), Flaky(down=4, up=9)
    rt = Runtime(env, low, None, rates=LoopRates(ctrl_hz=HZ, chunk_hz=HZ), inference=InferenceOptions("async"))
    events: list[RuntimeEvent] = []
    rt.listeners.append(events.append)
    rt.submit("task", "wave")
    sent: list[int] = []
    for _ in range(60):
        rt.tick()
        rt.clock.wait_next()
        sent.append(len(env.sent))
    warns = [e for e in events if e.kind == "warn"]
    assert len(warns) == 1 and "lost" in warns[0].text and "holding still" in warns[0].text
    lost, back = warns[0].frame, next(e.frame for e in events if e.kind == "info" and "answers again" in e.text)
    assert sent[back - 1] == sent[lost]  # nothing dispatched while it was lost (the queue was dropped)
    assert sent[-1] > sent[back] and rt.state.busy  # resumed, the task still on
    assert low.asked >= 9


class Planner:
    """The first update answers; later updates hang until released; interjections answer at once."""

    name = "hanging planner (test double)"
    wants_images = False

    def __init__(self) -> None:
        self.updates = 0
        self.entered, self.release = threading.Event(), threading.Event()

    def update(self, request: HighLevelRequest) -> HighLevelUpdate:
        if request.kind == "interjection":
            return HighLevelUpdate(subtask="place it in the right bin")
        self.updates += 1
        if self.updates == 1:
            return HighLevelUpdate(subtask="pick up the red cube")
        self.entered.set()
        self.release.wait(10)
        return HighLevelUpdate(subtask="a stale reply")

    def reset(self) -> None:
        pass


class TaggedController:
    """Sleeps `seconds` per chunk (really: the wall clock); each action carries its chunk's serial.
    While `hold` is set to an event, a chunk also waits for that event before it returns."""

    name = "tagged controller"
    wants_images = False

    def __init__(self, seconds: float, n: int = 8) -> None:
        self.seconds, self.n = seconds, n
        self.started: list[tuple[float, str]] = []  # per serial: when its call began, for which command
        self.ended: list[int] = []  # the serials, as their calls returned
        self.in_act = threading.Event()
        self.hold: threading.Event | None = None

    def act(self, observation: Observation, command: str) -> ActionChunk:
        serial = len(self.started)
        self.started.append((time.perf_counter(), command))
        self.in_act.set()
        time.sleep(self.seconds)
        if self.hold is not None:
            self.hold.wait(5)
        self.in_act.clear()
        self.ended.append(serial)
        return ActionChunk(np.full((self.n, 2), serial, dtype=np.float32))

    def reset(self) -> None:
        pass


def _wait_for(cond: Callable[[], object], timeout: float = 5.0) -> None:
    end = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < end, "timed out waiting for the loop"
        time.sleep(0.002)


def test_an_interjection_during_a_hung_high_level_call_is_acted_on_while_the_call_hangs() -> None:
    """Issue 23's bar: the interjection is taken at once (the hung update abandoned), the robot moves
    on its command while the hung call still hangs, and no chunk begun before it (one was in flight)
    is dispatched after. How soon (within one high-level period) is measured in benchmarks/latency.py."""
    env, planner, low = RecordingEnv(fps=50), Planner(), TaggedController(0.06)
    rates = LoopRates(ctrl_hz=50, chunk_hz=50, high_level_hz=2)
    rt = Runtime(env, low, planner, tools=ToolRegistry([SayTool(on_speech=lambda s: None)]), rates=rates,
                 realtime=True, inference=InferenceOptions("async"))
    taken = threading.Event()
    applied: list[tuple[int, int, int]] = []  # (actions sent, chunks begun, chunks returned) when it was taken

    def listen(e: RuntimeEvent) -> None:
        if e.kind == "interjection":
            applied.append((len(env.sent), len(low.started), len(low.ended)))
            taken.set()

    rt.listeners.append(listen)
    rt.submit("task", "put the red cube in the right bin")
    new = "place it in the right bin"
    with running(rt):
        assert planner.entered.wait(5), "the periodic update never came"
        low.hold = taken  # from now on no chunk returns before the interjection is taken
        _wait_for(low.in_act.is_set)  # a chunk for the old command is being computed right now
        rt.submit("interject", "no, the right bin")
        _wait_for(lambda: any(low.started[int(a[0])][1] == new for a in list(env.sent)))
        assert not planner.release.is_set()  # the hung call has not returned: the robot acted without it
    planner.release.set()
    ((sent, begun, returned),) = applied
    assert begun > returned  # one chunk was in flight when the interjection was taken
    after = [int(a[0]) for a in env.sent[sent:]]
    assert after and not set(after) & set(range(begun))  # none begun before it was dispatched after
    assert low.started[after[0]][1] == new and all(low.started[k][1] == new for k in after)
    assert rt.stats.high_level_discarded == 1 and rt.state.snapshot().subtask == new


def test_async_on_the_wall_clock_keeps_dispatching_while_a_slow_chunk_is_computed() -> None:
    env, low = RecordingEnv(fps=50), TaggedController(0.08, n=12)
    rt = Runtime(env, low, None, rates=LoopRates(ctrl_hz=50, chunk_hz=50), realtime=True,
                 inference=InferenceOptions("async"))
    rt.submit("task", "wave")
    rt.run(max_ticks=50)  # 1 s; chunks of 12 actions (0.24 s) take 0.08 s (4 ticks) each
    rt.close()
    gaps = np.diff(env.sent_at)
    # After the first chunk, one action every tick: no gap near the 80 ms a synchronous call stalls for.
    assert len(env.sent) >= 40 and gaps.max() < 0.05, (len(env.sent), gaps.max())
    assert rt.chunks.stats.late_actions > 0 and "steerable-chunks" not in threading.current_thread().name
