"""The policy server (issue 23): `steerable serve-policy` and `steerable run --policy.server HOST:PORT`,
over loopback with a slow fake policy. Killing the server mid-run makes the runtime hold still and say
so once; it resumes when the server is back."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from annotate_helpers import steerable
from process_helpers import free_port
from runtime_helpers import RecordingEnv, running, wait_for
from steerable.control import ActionChunk, ChunkPrefix, Observation
from steerable.errors import ConfigError
from steerable.runtime.chunks import InferenceOptions
from steerable.runtime.loop import LoopRates, Runtime, RuntimeEvent
from steerable.runtime.policy_server import PolicyServer
from steerable.runtime.policy_wire import pack, unpack
from steerable.runtime.remote_policy import RemoteGuidedPolicy, connect_policy, server_uri

HZ = 20

SERVER = '''
import sys, time
import numpy as np
from steerable.control import ActionChunk
from steerable.runtime.policy_server import PolicyServer


class SlowFake:
    """50 ms per chunk of 10 actions, each the robot's time index from the observation on."""

    name = "slow fake policy"
    wants_images = False

    def act(self, observation, command):
        time.sleep(0.05)
        k = int(round(observation.time_s * 20))
        v = np.arange(k, k + 10, dtype=np.float32)
        return ActionChunk(np.stack([v, v], axis=1))

    def reset(self):
        pass


# A fixed token: the restarted server must take the client's connection again.
PolicyServer(SlowFake(), "127.0.0.1", int(sys.argv[1]), token="a-test-token").serve_forever(
    on_ready=lambda url: print("ready", url, flush=True))
'''


def _start_server(script: Path, port: int) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, str(script), str(port)], stdout=subprocess.PIPE, text=True)
    ready: list[str] = []
    reader = threading.Thread(target=lambda: ready.append(proc.stdout.readline() if proc.stdout else ""), daemon=True)
    reader.start()
    reader.join(30)
    if not ready or not ready[0].startswith("ready"):
        proc.kill()
        raise AssertionError(f"the server did not start: {ready}")
    return proc


def test_killing_the_server_mid_run_holds_the_robot_still_says_so_once_and_it_resumes(tmp_path: Path) -> None:
    script = tmp_path / "server.py"
    script.write_text(SERVER)
    port = free_port()
    server = _start_server(script, port)
    try:
        low = connect_policy(f"127.0.0.1:{port}", token="a-test-token")
        assert low.name == f"slow fake policy (served at 127.0.0.1:{port})" and not low.wants_images
        env = RecordingEnv(HZ)
        rt = Runtime(env, low, None, rates=LoopRates(ctrl_hz=HZ, chunk_hz=HZ), realtime=True,
                     inference=InferenceOptions("async"))
        events: list[RuntimeEvent] = []
        marks: dict[str, int] = {}

        def listen(e: RuntimeEvent) -> None:
            events.append(e)
            if e.kind == "warn":
                marks.setdefault("lost", len(env.sent))
            if e.kind == "info" and "answers again" in e.text:
                marks.setdefault("back", len(env.sent))

        rt.listeners.append(listen)
        rt.submit("task", "wave")
        with running(rt):
            wait_for(lambda: len(env.sent) >= 10, timeout=10.0)
            # While it runs, each action is the robot's own time index: chunks land aligned.
            assert [int(a[0]) for a in env.sent[:10]] == list(range(10))
            server.kill()
            server.wait(10)
            wait_for(lambda: "lost" in marks, timeout=10.0)
            time.sleep(1.2)  # two more reconnection attempts (2 a second), both refused
            held = len(env.sent)
            server = _start_server(script, port)
            wait_for(lambda: "back" in marks, timeout=10.0)
            wait_for(lambda: len(env.sent) >= held + 10, timeout=10.0)
        warns = [e.text for e in events if e.kind == "warn"]
        assert len(warns) == 1, warns
        assert warns[0].startswith(f"policy server 127.0.0.1:{port} lost (") and "holding still" in warns[0]
        assert marks["lost"] == held == marks["back"]  # nothing dispatched while it was gone
        # Every chunk that came back was timed, its round trip holding the server's own 50 ms; how
        # long a round trip takes is measured in benchmarks/latency.py.
        assert len(low.round_trips) == len(low.server_seconds) > 0
        assert all(trip >= own >= 0.05 for trip, own in zip(low.round_trips, low.server_seconds, strict=True))
    finally:
        server.kill()
        server.wait(10)


class GuidedFake:
    name = "guided fake"
    wants_images = True

    def __init__(self) -> None:
        self.prefixes: list[ChunkPrefix] = []
        self.resets = 0

    def act(self, observation: Observation, command: str) -> ActionChunk:
        assert observation.images["cam"].shape == (4, 6, 3)
        return ActionChunk(np.full((5, 2), float(len(command)), dtype=np.float32), done=command == "stop")

    def act_continuing(self, observation: Observation, command: str, prefix: ChunkPrefix) -> ActionChunk:
        self.prefixes.append(prefix)
        return self.act(observation, command)

    def reset(self) -> None:
        self.resets += 1


def test_a_guided_policy_gets_the_prefix_over_the_wire_and_resets_travel_with_the_next_request() -> None:
    fake = GuidedFake()
    server = PolicyServer(fake, "127.0.0.1", 0).start()
    try:
        low = connect_policy(f"127.0.0.1:{server.port}", token=server.token)
        assert isinstance(low, RemoteGuidedPolicy) and low.wants_images
        obs = Observation(state=np.ones(2, np.float32), images={"cam": np.zeros((4, 6, 3), np.uint8)})
        prefix = ChunkPrefix(np.arange(6, dtype=np.float32).reshape(3, 2), np.array([1, 0.5, 0.1], np.float32), 1, 3.0)
        chunk = low.act_continuing(obs, "wave", prefix)
        assert chunk.actions.shape == (5, 2) and float(chunk.actions[0, 0]) == 4.0
        (got,) = fake.prefixes
        assert got.actions.tolist() == prefix.actions.tolist() and got.delay == 1 and got.max_guidance == 3.0
        low.reset()
        assert low.act(obs, "stop").done and fake.resets == 1
    finally:
        server.close()


def test_the_wire_carries_numeric_arrays_only() -> None:
    data = pack({"type": "x", "a": np.arange(6, dtype=np.int16).reshape(2, 3), "f": np.float32(1.5)})
    out = unpack(data)
    assert out["a"].dtype == np.int16 and out["a"].tolist() == [[0, 1, 2], [3, 4, 5]] and out["f"] == 1.5
    evil = pack({"type": "x", "a": {"__ndarray__": True, "dtype": "|O", "shape": [1], "data": b"\0" * 8}})
    with pytest.raises(ValueError, match="only numeric arrays"):
        unpack(evil)
    with pytest.raises(ConfigError, match="HOST:PORT"):
        server_uri("gpu-box")


def test_cli_a_server_that_does_not_answer_stops_run_before_anything_moves() -> None:
    port = free_port()
    done = steerable("run", "--env", "sim", "--policy.server", f"127.0.0.1:{port}", "--task",
                     "put the red cube in the left bin", timeout=120)
    assert done.returncode == 2
    assert f"--policy.server 127.0.0.1:{port}: no steerable policy server answers there" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    both = steerable("run", "--policy.server", "127.0.0.1:1", "--low_level", "scripted", timeout=120)
    assert both.returncode == 2 and "does not combine with --low_level scripted" in both.stderr
    serve = steerable("serve-policy", "--port", "8765", timeout=120)
    assert serve.returncode == 2 and "--policy.path CKPT is required" in serve.stderr
