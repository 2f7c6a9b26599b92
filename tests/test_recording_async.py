"""A recording never stalls the control loop (issue 34, item 13), and a question typed in the REPL is
recorded as one from a commands file is (item 5).

The episode's videos and files are written on the recorder's own thread: a `/task` (which ends the
episode before it) costs the loop nothing, and an operator's line is stamped at the tick it was
received. A model called beside the loop (the REPL) answers a question ticks after it was asked; the
answer is still recorded with it."""

from __future__ import annotations

import errno
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from runtime_helpers import recorded_language, wait_for
from steerable.control import Observation
from steerable.dataset.build import DatasetBuilder
from steerable.errors import WriteError
from steerable.runtime.loop import LoopRates, RuntimeEvent
from steerable.runtime.recording import Recorder
from steerable.runtime.repl import run_repl
from steerable.runtime.session import Session, SessionOptions

HZ = 15
FIRST = "put the red cube in the left bin"
SECOND = "put the orange cube in the blue bin"
SLOW_WRITE_S = 1.5  # what writing the first episode takes here (a long episode's videos took ~2 s)


def _ticking(session: Session) -> tuple[threading.Event, threading.Thread]:
    stop = threading.Event()
    loop = threading.Thread(target=session.runtime.run, kwargs={"until": stop.is_set}, daemon=True)
    loop.start()
    return stop, loop


def test_a_new_task_does_not_stall_the_loop_and_an_interjection_is_stored_where_it_was_sent(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write = DatasetBuilder.add_episode
    slowed: list[int] = []

    def slow_write(self: DatasetBuilder, *args: Any, **kwargs: Any) -> int:
        if not slowed:  # the first episode's, at the /task; the last one's at close goes at its own pace
            slowed.append(1)
            time.sleep(SLOW_WRITE_S)
        return write(self, *args, **kwargs)

    monkeypatch.setattr(DatasetBuilder, "add_episode", slow_write)
    record = tmp_path / "rec"
    session = Session(SessionOptions(task=FIRST, seed=7, record=record, realtime=True, rates=LoopRates(ctrl_hz=HZ)),
                      out=lambda _: None)
    rt = session.runtime
    rt.keep_timings = True
    events: list[RuntimeEvent] = []
    rt.listeners.append(events.append)
    stop, loop = _ticking(session)
    try:
        wait_for(lambda: rt.frame >= 5, timeout=10)
        before = len(rt.stats.tick_seconds)
        rt.submit("task", SECOND)  # ends the first episode: its write starts now
        wait_for(lambda: any(e.kind == "task" and e.text == SECOND for e in events), timeout=10)
        time.sleep(0.5)
        sent_at = rt.frame
        rt.submit("interject", "no, the right bin")
        wait_for(lambda: any(e.kind == "interjection" for e in events), timeout=10)
        assert session.recorder is not None
        session.recorder._queue.join()  # the first episode is written: the ticks measured span its write
        end = rt.frame
        wait_for(lambda: rt.frame > end + 1, timeout=10)
    finally:
        stop.set()
        loop.join(10)
    assert session.close() == record
    task = next(e for e in events if e.kind == "task" and e.text == SECOND)
    said = next(e for e in events if e.kind == "interjection")
    around = rt.stats.tick_seconds[before:]
    assert max(around) < SLOW_WRITE_S / 3, f"a tick took {max(around):.2f} s while the episode was written"
    assert sent_at - task.frame >= 0.5 * HZ / 2, "the loop kept ticking after the /task"
    assert said.frame in (sent_at, sent_at + 1)
    _, recorded, problems = recorded_language(record, 1)
    assert problems == []
    at = [t for t, rows in recorded.items() for r in rows if r.get("style") == "interjection"]
    assert at == [pytest.approx((said.frame - task.frame) / HZ)]


def test_a_line_received_during_a_tick_is_stamped_at_that_tick() -> None:
    session = Session(SessionOptions(task=FIRST, seed=7), out=lambda _: None)
    rt = session.runtime
    events: list[RuntimeEvent] = []
    rt.listeners.append(events.append)
    rt.run(max_ticks=10)
    busy = rt.frame
    # Typed while tick `busy` runs (its inputs already read): applied at the next tick, stamped at this one.
    rt.frame_hooks.append(lambda *_: rt.submit("interject", "no, the right bin") if rt.frame == busy else None)
    rt.run(max_ticks=3)
    session.close()
    said = next(e for e in events if e.kind == "interjection")
    assert said.frame == busy


def test_a_failed_write_on_the_writer_thread_stops_the_loop_at_its_next_tick(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    def full(self: DatasetBuilder, *args: Any, **kwargs: Any) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(DatasetBuilder, "add_episode", full)
    recorder = Recorder(tmp_path / "rec", fps=HZ)
    recorder.on_event(RuntimeEvent("task", FIRST, 0, 0.0))
    for _ in range(3):
        recorder.on_frame(Observation(state=np.zeros(3, np.float32)), np.zeros(3, np.float32))
    recorder.on_event(RuntimeEvent("task", SECOND, 3, 0.2))  # returns at once: the writer fails beside the loop
    recorder._queue.join()
    with pytest.raises(WriteError, match=r"no space left.*none of the 1 episode\(s\) could be written"):
        recorder.on_frame(Observation(state=np.zeros(3, np.float32)), np.zeros(3, np.float32))
    assert recorder.close() is None
    assert list(tmp_path.iterdir()) == [], "nothing half-built is left"


def test_a_question_typed_in_the_repl_is_recorded_with_its_answer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """The REPL itself, on a pseudo-terminal: the high level answers on its own thread, ticks later."""
    record = tmp_path / "rec"
    session = Session(SessionOptions(task=FIRST, seed=7, record=record, realtime=True), out=lambda _: None)
    events: list[RuntimeEvent] = []
    session.runtime.listeners.append(events.append)
    keyboard, terminal = os.openpty()
    tty = os.fdopen(terminal, "r")
    monkeypatch.setattr(sys, "stdin", tty)
    done: list[int] = []
    repl = threading.Thread(target=lambda: done.append(run_repl(session)), daemon=True)
    repl.start()
    try:
        wait_for(lambda: any(e.kind == "subtask" for e in events), timeout=20)
        os.write(keyboard, b"/ask where is the red cube?\r")
        wait_for(lambda: any(e.kind == "answer" for e in events), timeout=20)
        os.write(keyboard, b"/quit\r")
        repl.join(30)
    finally:
        os.close(keyboard)
        tty.close()
    assert done == [0]
    question = next(e for e in events if e.kind == "question")
    answer = next(e for e in events if e.kind == "answer")
    assert answer.frame > question.frame  # answered ticks later, on the model's thread
    _, recorded, problems = recorded_language(record)
    assert problems == []
    vqa = {r["role"]: r["content"] for rows in recorded.values() for r in rows if r.get("style") == "vqa"}
    assert vqa == {"user": "where is the red cube?", "assistant": answer.text}
    assert [t for t, rows in recorded.items() if any(r.get("style") == "vqa" for r in rows)] == [
        pytest.approx(question.frame / session.runtime.rates.ctrl_hz)]
    assert answer.question_frame == question.frame
