"""The Ray executor on a local Ray cluster (2 CPUs), against the local test server.

One cluster for the module (Ray start-up is slow): the same language columns as the local executor
for the same answers, and a worker killed mid-run costs nothing (no episode lost or redone).
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
import ray

from annotate_helpers import copy_dataset, make_synthetic
from steerable.annotate.config import AnnotateConfig
from steerable.annotate.run import annotate
from steerable.annotate.summary import RunSummary
from steerable.distributed import RayExecutor
from steerable.distributed.ray_executor import endpoints_for
from steerable.testing.server import TestServer
from steerable.testing.server.plausible import plausible_responder

EPISODES = 6
MODULES = 4


@pytest.fixture(scope="module")
def cluster() -> Any:
    ray.init(num_cpus=2, include_dashboard=False, logging_level=logging.WARNING)
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


def test_ray_writes_what_local_writes(cluster: Any, source: Path, local_run: tuple[Path, RunSummary], tmp_path: Path) -> None:
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


def _finished(staging: Path) -> dict[int, dict[str, tuple[int, int]]]:
    """Episodes whose every module is staged -> marker file -> (inode, mtime_ns)."""
    done = {}
    for folder in staging.glob("episode_*"):
        markers = list(folder.glob("*.done.json"))
        if len(markers) == MODULES:
            done[int(folder.name.split("_")[1])] = {
                m.name: (m.stat().st_ino, m.stat().st_mtime_ns) for m in markers
            }
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
