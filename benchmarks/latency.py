"""Latencies the tests once asserted (issue 38: the tests now check that each thing happens, in
order; how fast is measured here):

1. `steerable view`: ten GETs on one kept-alive connection, milliseconds per reply. With Nagle's
   algorithm a reply written as headers then body waited for the client's delayed ACK (about 40 ms
   each); asyncio sets TCP_NODELAY on the server's connections (`tests/test_viewer_server.py`).
2. `steerable run --inference async`: an interjection during a hung high-level call, from the loop
   taking it to the robot's first action of the new command (50 Hz control, chunks of 60 ms, a
   high level asked at 2 Hz: issue 23's bar is one high-level period, 0.5 s;
   `tests/test_runtime_chunks.py`).
3. The policy server (`steerable serve-policy`): round trips over loopback for a fake policy that
   takes 50 ms a chunk, and what the connection adds to the server's own seconds
   (`tests/test_policy_server.py`).

Run: `.venv/bin/python benchmarks/latency.py [--repeats 5]`. Ends with a RESULT line.
"""

from __future__ import annotations

import argparse
import http.client
import statistics
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from steerable.control import ActionChunk, HighLevelRequest, HighLevelUpdate, Observation
from steerable.dataset import LeRobotDataset
from steerable.runtime.chunks import InferenceOptions
from steerable.runtime.loop import LoopRates, Runtime
from steerable.runtime.policy_server import PolicyServer
from steerable.runtime.remote_policy import connect_policy
from steerable.viewer import ViewerData, make_server
from view import make_dataset


def viewer_reply_ms(root: Path, replies: int = 10) -> float:
    """Milliseconds per reply of `replies` GETs on one kept-alive connection (after one to warm up)."""
    server = make_server(ViewerData(LeRobotDataset(root)), "127.0.0.1", 0)
    server.start()
    try:
        conn = http.client.HTTPConnection(*server.server_address, timeout=30)
        conn.request("GET", "/assets/style.css")
        conn.getresponse().read()
        started = time.perf_counter()
        for _ in range(replies):
            conn.request("GET", "/assets/style.css")
            conn.getresponse().read()
        elapsed = time.perf_counter() - started
        conn.close()
    finally:
        server.shutdown()
        server.server_close()
    return 1000 * elapsed / replies


class _Env:
    fps, action_dim, state_names, camera_keys = 50, 2, ("a", "b"), ()

    def __init__(self) -> None:
        self.sent: list[tuple[float, float]] = []  # (chunk serial, when)

    def observe(self, *, render: bool = True) -> Observation:
        return Observation(state=np.zeros(2, np.float32), time_s=len(self.sent) / self.fps)

    def send_action(self, action: np.ndarray) -> None:
        self.sent.append((float(action[0]), time.perf_counter()))

    def close(self) -> None:
        pass


class _HangingPlanner:
    name, wants_images = "hanging planner", False

    def __init__(self) -> None:
        self.updates, self.entered, self.release = 0, threading.Event(), threading.Event()

    def update(self, request: HighLevelRequest) -> HighLevelUpdate:
        if request.kind == "interjection":
            return HighLevelUpdate(subtask="place it in the right bin")
        self.updates += 1
        if self.updates > 1:
            self.entered.set()
            self.release.wait(10)
        return HighLevelUpdate(subtask="pick up the red cube")

    def reset(self) -> None:
        pass


class _SlowController:
    """60 ms a chunk of 8 actions, each carrying its chunk's serial; records each chunk's command."""

    name, wants_images = "slow controller", False

    def __init__(self) -> None:
        self.commands: list[str] = []

    def act(self, observation: Observation, command: str) -> ActionChunk:
        self.commands.append(command)
        time.sleep(0.06)
        return ActionChunk(np.full((8, 2), len(self.commands) - 1, np.float32))

    def reset(self) -> None:
        pass


def interjection_s() -> float:
    """Seconds from the loop taking an interjection (during a hung high-level call) to the robot's first
    action of the new command."""
    env, planner, low = _Env(), _HangingPlanner(), _SlowController()
    rt = Runtime(env, low, planner, rates=LoopRates(ctrl_hz=50, chunk_hz=50, high_level_hz=2), realtime=True,
                 inference=InferenceOptions("async"))
    applied: list[float] = []
    rt.listeners.append(lambda e: applied.append(time.perf_counter()) if e.kind == "interjection" else None)
    rt.submit("task", "put the red cube in the right bin")
    stop = threading.Event()
    loop = threading.Thread(target=rt.run, kwargs={"until": stop.is_set}, daemon=True)
    loop.start()
    try:
        planner.entered.wait(5)
        rt.submit("interject", "no, the right bin")
        end = time.monotonic() + 5
        while time.monotonic() < end:
            new = {k for k, c in enumerate(low.commands) if c == "place it in the right bin"}
            moved = [t for serial, t in list(env.sent) if int(serial) in new]
            if moved and applied:
                return moved[0] - applied[0]
            time.sleep(0.002)
        raise RuntimeError("the interjection was not acted on within 5 s")
    finally:
        planner.release.set()
        stop.set()
        loop.join(5)
        rt.close()


class _FakePolicy:
    name, wants_images = "fake policy (50 ms a chunk)", False

    def act(self, observation: Observation, command: str) -> ActionChunk:
        time.sleep(0.05)
        return ActionChunk(np.zeros((10, 2), np.float32))

    def reset(self) -> None:
        pass


def round_trips(chunks: int) -> tuple[list[float], list[float]]:
    """(round trip seconds, the server's own seconds) of `chunks` chunks asked over loopback."""
    server = PolicyServer(_FakePolicy(), "127.0.0.1", 0).start()  # type: ignore[arg-type]
    try:
        low = connect_policy(f"127.0.0.1:{server.port}", token=server.token)
        obs = Observation(state=np.zeros(2, np.float32))
        for _ in range(chunks):
            low.act(obs, "wave")
        trips, own = list(low.round_trips), list(low.server_seconds)
        low.close()
        return trips, own
    finally:
        server.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--chunks", type=int, default=40)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = make_dataset(Path(tmp) / "ds", 2)
        reply = [viewer_reply_ms(root) for _ in range(args.repeats)]
    acted = [interjection_s() for _ in range(args.repeats)]
    trips, own = round_trips(args.chunks)
    added = [1000 * (t - s) for t, s in zip(trips, own, strict=True)]
    print("| what | median | max |\n|---|---|---|")
    print(f"| view: ms per kept-alive reply (10 in a row) | {statistics.median(reply):.2f} | {max(reply):.2f} |")
    print(f"| run: s from interjection to acting on it (bar 0.5) | {statistics.median(acted):.3f} | "
          f"{max(acted):.3f} |")
    print(f"| serve-policy: ms per round trip (server 50 ms) | {1000 * statistics.median(trips):.1f} | "
          f"{1000 * max(trips):.1f} |")
    print(f"| serve-policy: ms the connection adds | {statistics.median(added):.1f} | {max(added):.1f} |")
    print(f"RESULT view_reply_ms={statistics.median(reply):.2f} interjection_acted_s={statistics.median(acted):.3f} "
          f"interjection_acted_s_max={max(acted):.3f} round_trip_ms={1000 * statistics.median(trips):.1f} "
          f"round_trip_ms_max={1000 * max(trips):.1f} connection_ms={statistics.median(added):.1f}")


if __name__ == "__main__":
    main()
