"""Helpers for runtime tests: read a recorded dataset's language back and validate it."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from steerable.control import Observation
from steerable.language import rows_from_arrow, validate_rows
from steerable.runtime.loop import Runtime


class RecordingEnv:
    """A two-dimensional robot that records what was dispatched and when; its clock is the number of
    actions executed at `fps` (the robot's time)."""

    action_dim = 2
    state_names = ("a", "b")
    camera_keys = ()

    def __init__(self, fps: float = 10) -> None:
        self.fps = fps
        self.sent: list[np.ndarray] = []
        self.sent_at: list[float] = []

    def observe(self, *, render: bool = True) -> Observation:
        return Observation(state=np.zeros(2, dtype=np.float32), time_s=len(self.sent) / self.fps)

    def send_action(self, action: np.ndarray) -> None:
        self.sent.append(action)
        self.sent_at.append(time.perf_counter())

    def close(self) -> None:
        pass


def recorded_language(root: Path, episode: int = 0
                      ) -> tuple[list[dict[str, Any]], dict[float, list[dict[str, Any]]], list]:
    """(persistent rows, {timestamp: event rows}, validation problems) of one recorded episode."""
    table = pa.concat_tables(pq.read_table(p) for p in sorted((root / "data").rglob("*.parquet")))
    mask = [e == episode for e in table.column("episode_index").to_pylist()]
    table = table.filter(mask)
    times = table.column("timestamp").to_pylist()
    persistent = rows_from_arrow(table.column("language_persistent"))[0]
    cells = rows_from_arrow(table.column("language_events"))
    events = {t: rows for t, rows in zip(times, cells, strict=True) if rows}
    pairs = [(t, row) for t, rows in events.items() for row in rows]
    problems = validate_rows(persistent, pairs, frame_timestamps=times,
                             cameras=["observation.images.top", "observation.images.wrist"])
    return persistent, events, problems


def wait_for(cond: Callable[[], bool], timeout: float = 5.0) -> None:
    """Poll `cond` until it holds; fail after `timeout` seconds."""
    end = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < end, "timed out waiting for the loop"
        time.sleep(0.005)


@contextmanager
def running(rt: Runtime) -> Iterator[None]:
    """`rt` ticking on its own thread for the block; stopped, closed and joined after it."""
    stop = threading.Event()
    loop = threading.Thread(target=rt.run, kwargs={"until": stop.is_set}, daemon=True)
    loop.start()
    try:
        yield
    finally:
        stop.set()
        loop.join(5)
        rt.close()
        assert not loop.is_alive()
