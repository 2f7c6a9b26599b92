"""The Ray executor on a local Ray cluster (2 CPUs), against the local test server.

One cluster for the module (Ray start-up is slow): the same language columns as the local executor
for the same answers, and a worker killed mid-run costs nothing (no episode lost or redone).
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
import ray

from annotate_helpers import copy_dataset, make_synthetic
from process_helpers import free_ports, pid_alive
from steerable.annotate.config import AnnotateConfig
from steerable.annotate.run import annotate
from steerable.annotate.summary import RunSummary
from steerable.distributed import RayExecutor
from steerable.distributed.ray_executor import endpoints_for, replica_settings
from steerable.testing.server import TestServer
from steerable.testing.server.plausible import plausible_responder

# The files that start a Ray cluster share one worker of `make test` (tests/conftest.py).
pytestmark = pytest.mark.xdist_group("ray")

EPISODES = 6
MODULES = 4


# A fake `vllm serve MODEL --port P ...`: records (port, pid, CUDA_VISIBLE_DEVICES), then serves the test server.
FAKE_VLLM = """#!{python}
import os, sys
args = sys.argv[1:]
port = args[args.index("--port") + 1]
with open({record!r}, "a") as fh:
    fh.write(f"{{port}} {{os.getpid()}} {{os.environ.get('CUDA_VISIBLE_DEVICES', '')}}\\n")
os.execv(sys.executable, [sys.executable, "-m", "steerable.testing.server", "--port", port,
                          "--model", args[1], "--responder", "plausible"])
"""


@pytest.fixture(scope="module")
def fake_vllm_record(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the fake `vllm` (on the PATH the local cluster's workers inherit) records its launches."""
    bin_dir = tmp_path_factory.mktemp("bin")
    record = bin_dir / "launches.txt"
    script = bin_dir / "vllm"
    script.write_text(FAKE_VLLM.format(python=sys.executable, record=str(record)))
    script.chmod(0o755)
    return record


@pytest.fixture(scope="module")
def cluster(fake_vllm_record: Path) -> Any:
    path = os.environ["PATH"]
    os.environ["PATH"] = f"{fake_vllm_record.parent}{os.pathsep}{path}"  # the workers inherit it
    try:
        # Two logical GPUs: an actor reserving one gets CUDA_VISIBLE_DEVICES from Ray.
        ray.init(num_cpus=2, num_gpus=2, include_dashboard=False, logging_level=logging.WARNING)
    finally:
        os.environ["PATH"] = path
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_synthetic(tmp_path_factory.mktemp("ray") / "ds", episodes=EPISODES)


def _cfg(root: Path, url: str, **executor: Any) -> AnnotateConfig:
    return AnnotateConfig(
        root=root,
        vlm={"base_url": url, "model_id": "test-model", "backoff_base_s": 0.01},
        executor={"progress": False, **executor},
    )


def _language(root: Path) -> list[dict[str, Any]]:
    tables = [pq.read_table(p) for p in sorted((root / "data").rglob("*.parquet"))]
    cols = ["episode_index", "frame_index", "language_persistent", "language_events"]
    return [row for t in tables for row in t.select(cols).to_pylist()]


def _shape(summary: RunSummary) -> dict[str, Any]:
    data = summary.to_json()
    return {
        "keys": sorted(data),
        "modules": data["modules"],
        "selected": data["episodes_selected"],
        "annotated": data["episodes_annotated"],
        "failures": data["failures"],
        "per_module": data["per_module"],
        "producers": data["producers"],
        "vlm_keys": sorted(data["vlm"]),
    }


@pytest.fixture(scope="module")
def local_run(source: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, RunSummary]:
    root = copy_dataset(source, tmp_path_factory.mktemp("local") / "ds")
    with TestServer(responder=plausible_responder) as server:
        summary = annotate(_cfg(root, server.url))
    assert summary.episodes_annotated == EPISODES
    return root, summary


def test_endpoints_split_across_actors() -> None:
    urls = ["http://a", "http://b", "http://c"]
    assert endpoints_for(urls, 0, 2) == ["http://a", "http://c"]
    assert endpoints_for(urls, 1, 2) == ["http://b"]
    assert endpoints_for(urls[:1], 1, 2) == ["http://a"]  # two actors share one server
    assert endpoints_for([], 0, 2) == []


def test_ray_writes_what_local_writes(
    cluster: Any, source: Path, local_run: tuple[Path, RunSummary], tmp_path: Path
) -> None:
    local_root, local = local_run
    root = copy_dataset(source, tmp_path / "ds")
    with TestServer(responder=plausible_responder) as one, TestServer(responder=plausible_responder) as two:
        cfg = _cfg(root, f"{one.url},{two.url}", backend="ray", workers=2)
        summary = annotate(cfg, executor=RayExecutor(cfg.executor))
        assert one.stats.completed > 0 and two.stats.completed > 0  # each actor used its own server
    assert _language(root) == _language(local_root)
    assert _shape(summary) == _shape(local)
    assert summary.vlm is not None and local.vlm is not None
    assert summary.vlm.calls == local.vlm.calls  # the workers' counters, summed on the driver
    assert summary.vlm.in_flight == 0 and summary.vlm.succeeded == local.vlm.succeeded


def test_staging_on_a_file_url(cluster: Any, source: Path, local_run: tuple[Path, RunSummary], tmp_path: Path) -> None:
    root = copy_dataset(source, tmp_path / "ds")
    staging = tmp_path / "shared" / "staging"
    with TestServer(responder=plausible_responder) as server:
        cfg = _cfg(root, server.url, backend="ray", workers=2).model_copy(update={"staging_dir": staging.as_uri()})
        summary = annotate(cfg, executor=RayExecutor(cfg.executor))
    assert summary.episodes_annotated == EPISODES and summary.failures == []
    assert _language(root) == _language(local_run[0])
    assert len(list(staging.glob("episode_*/*.done.json"))) == EPISODES * MODULES  # the actors staged there
    assert not (root / ".steerable" / "staging").exists()


def test_each_actor_launches_its_own_vllm_replica(
    cluster: Any, fake_vllm_record: Path, source: Path, local_run: tuple[Path, RunSummary], tmp_path: Path
) -> None:
    root = copy_dataset(source, tmp_path / "ds")
    base = free_ports(2)  # each actor's replica takes base + its rank
    vlm = {
        "backend": "vllm",
        "model_id": "test-model",
        "serve_port": base,
        "serve_ready_timeout_s": 60.0,
        "log_dir": tmp_path / "logs",
        "backoff_base_s": 0.01,
    }
    cfg = AnnotateConfig(
        root=root, vlm=vlm, executor={"progress": False, "backend": "ray", "workers": 2, "worker_gpus": 1}
    )
    fake_vllm_record.unlink(missing_ok=True)
    summary = annotate(cfg, executor=RayExecutor(cfg.executor))
    launches = sorted(line.split() for line in fake_vllm_record.read_text().splitlines())
    assert [int(port) for port, _, _ in launches] == [base, base + 1]  # one replica per actor, own port
    assert sorted(gpu for _, _, gpu in launches) == ["0", "1"]  # each on the GPU Ray gave its actor
    assert sorted(p.parent.name for p in (tmp_path / "logs").glob("*/vllm-replica-0.log")) == ["worker-0", "worker-1"]
    assert summary.episodes_annotated == EPISODES and summary.failures == []
    assert _language(root) == _language(local_run[0])
    for _, pid, _ in launches:  # each actor stopped its replica at the end of the run
        deadline = time.monotonic() + 10
        while pid_alive(int(pid)) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not pid_alive(int(pid)), f"replica {pid} still running"


def test_replica_ports_do_not_collide() -> None:
    from steerable.vlm.config import VLMConfig

    vlm = VLMConfig(backend="vllm", model_id="m", serve_port=9000, log_dir=Path("/logs"))
    assert replica_settings(vlm, 0, 1) == {"serve_port": 9000, "log_dir": Path("/logs/worker-0")}
    assert replica_settings(vlm, 1, 2)["serve_port"] == 9002  # two GPUs each: one replica per GPU
    one_each = vlm.model_copy(update={"parallel_servers": 1, "log_dir": None})
    assert replica_settings(one_each, 3, 4) == {"serve_port": 9003}


def _finished(staging: Path) -> dict[int, dict[str, tuple[int, int]]]:
    """Episodes whose every module is staged -> marker file -> (inode, mtime_ns)."""
    done = {}
    for folder in staging.glob("episode_*"):
        markers = list(folder.glob("*.done.json"))
        if len(markers) == MODULES:
            done[int(folder.name.split("_")[1])] = {m.name: (m.stat().st_ino, m.stat().st_mtime_ns) for m in markers}
    return done


def test_a_worker_killed_mid_run_loses_and_redoes_nothing(
    cluster: Any, source: Path, local_run: tuple[Path, RunSummary], tmp_path: Path
) -> None:
    root = copy_dataset(source, tmp_path / "ds")
    staging = root / ".steerable" / "staging"
    seen: dict[str, Any] = {}

    def kill_one_worker() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            done = _finished(staging) if staging.is_dir() else {}
            if len(done) >= 1 and executor.session is not None:
                workers = executor.session.live_workers()
                if workers:
                    seen["before"] = done
                    pid = ray.get(workers[0].pid.remote())
                    os.kill(pid, signal.SIGKILL)
                    seen["killed"] = pid
                    return
            time.sleep(0.02)

    with TestServer(responder=plausible_responder, latency_s=0.15, capacity=4) as server:
        cfg = _cfg(root, server.url, backend="ray", workers=2, batch_episodes=1)
        executor = RayExecutor(cfg.executor)
        killer = threading.Thread(target=kill_one_worker, daemon=True)
        killer.start()
        summary = annotate(cfg, executor=executor)
        killer.join(timeout=5)
    assert "killed" in seen, "the run finished before a worker could be killed"
    assert len(seen["before"]) < EPISODES  # the kill happened mid-run
    # Nothing lost: every episode annotated, the same rows as the local executor.
    assert summary.episodes_annotated == EPISODES and summary.failures == []
    assert _language(root) == _language(local_run[0])
    assert _shape(summary) == _shape(local_run[1])  # the same summary as a run without faults
    # Nothing redone: the markers of episodes finished before the kill were never rewritten.
    after = _finished(staging)
    for episode, markers in seen["before"].items():
        assert after[episode] == markers, f"episode {episode} was annotated twice"


# A slower fake (each answer after 0.2 s, so the run is still going when its actor dies) that records its own launches.
SLOW_VLLM = """#!{python}
import os, sys
args = sys.argv[1:]
port = args[args.index("--port") + 1]
with open({record!r}, "a") as fh:
    fh.write(f"{{port}} {{os.getpid()}}\\n")
os.execv(sys.executable, [sys.executable, "-m", "steerable.testing.server", "--port", port,
                          "--model", args[1], "--responder", "plausible", "--latency", "0.2"])
"""


def test_a_killed_actors_vllm_replica_ends_and_the_replacement_serves_on_its_port(
    cluster: Any, source: Path, local_run: tuple[Path, RunSummary], tmp_path: Path
) -> None:
    root = copy_dataset(source, tmp_path / "ds")
    staging = root / ".steerable" / "staging"
    record = tmp_path / "launches.txt"
    fake = tmp_path / "slow-vllm"
    fake.write_text(SLOW_VLLM.format(python=sys.executable, record=str(record)))
    fake.chmod(0o755)
    port = free_ports(1)  # out of the range Ray's own connections draw from
    vlm = {
        "backend": "vllm",
        "model_id": "test-model",
        "serve_port": port,
        "serve_ready_timeout_s": 60.0,
        "serve_command": f"{fake} serve {{model}} --port {{port}}",
        "backoff_base_s": 0.01,
    }
    cfg = AnnotateConfig(
        root=root,
        vlm=vlm,
        executor={"progress": False, "backend": "ray", "workers": 1, "worker_gpus": 1, "batch_episodes": 1},
    )
    executor = RayExecutor(cfg.executor)
    seen: dict[str, Any] = {}

    def kill_the_actor() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if record.exists() and staging.is_dir() and _finished(staging) and executor.session is not None:
                workers = executor.session.live_workers()
                if workers:
                    seen["replica"] = int(record.read_text().split()[1])
                    os.kill(ray.get(workers[0].pid.remote()), signal.SIGKILL)
                    gone_by = time.monotonic() + 5
                    while pid_alive(seen["replica"]) and time.monotonic() < gone_by:
                        time.sleep(0.05)
                    seen["replica_alive"] = pid_alive(seen["replica"])
                    return
            time.sleep(0.02)

    killer = threading.Thread(target=kill_the_actor, daemon=True)
    killer.start()
    summary = annotate(cfg, executor=executor)
    killer.join(timeout=10)
    assert "replica" in seen, "the run finished before its actor could be killed"
    assert seen["replica_alive"] is False, "the killed actor's vLLM replica kept running"
    launches = [line.split() for line in record.read_text().splitlines()]
    assert [int(p) for p, _ in launches] == [port, port]  # the replacement's replica took the same port
    assert summary.episodes_annotated == EPISODES and summary.failures == []
    assert _language(root) == _language(local_run[0])
