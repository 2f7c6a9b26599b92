"""The Ray executor: how close 1 and 2 workers (and 2 servers) come to the servers' limit, and
what the driver adds per episode compared to the local executor.

Test servers (own processes, as real ones) answer each call after L seconds, at most C at once, so
S servers allow at most S*C/L calls/s: the ideal. Every case annotates the same synthetic dataset
(all modules) from scratch; calls/s = the run's VLM calls / pipeline seconds (first episode
dispatched to last result in; Ray cluster and actor start-up excluded and reported apart).
Each actor's `--vlm.client_concurrency` is its share of its server's capacity.

Driver overhead: the same run against an instant server, local executor vs 1 Ray worker;
(Ray pipeline s - local pipeline s) / episodes is what batching, streaming results back and
merging counters cost per episode. Run: python benchmarks/annotate_ray.py [--episodes 24]
[--latency 0.2] [--capacity 8]
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import ray

from annotate import start_server  # benchmarks/annotate.py: the test server, one per call
from steerable.annotate.config import AnnotateConfig
from steerable.annotate.run import annotate
from steerable.annotate.summary import RunSummary
from steerable.distributed import RayExecutor


def run_case(src: Path, work: Path, urls: list[str], *, workers: int | None, concurrency: int
             ) -> tuple[RunSummary, float]:
    """One annotate run on a fresh copy; (summary, process-side wall seconds)."""
    root = work / "ds"
    shutil.rmtree(root, ignore_errors=True)
    shutil.copytree(src, root, ignore=shutil.ignore_patterns(".steerable"))
    executor: dict[str, Any] = {"progress": False, "episode_parallelism": 16}
    if workers is not None:
        executor.update(backend="ray", workers=workers)
    cfg = AnnotateConfig(
        root=root,
        vlm={"base_url": ",".join(urls), "model_id": "test-model", "client_concurrency": concurrency},
        executor=executor,
    )
    started = time.perf_counter()
    summary = annotate(cfg, executor=RayExecutor(cfg.executor) if workers is not None else None)
    wall = time.perf_counter() - started
    if summary.failures:
        raise SystemExit(f"run failed: {summary.failures[0].reason}")
    return summary, wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=24)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--capacity", type=int, default=8)
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "steerable_bench_annotate_ray")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    src = args.work / f"syn_{args.episodes}"
    if not (src / "meta" / "info.json").is_file():
        from steerable.synthetic import generate_synthetic

        generate_synthetic(src, episodes=args.episodes, cameras=("top",), seed=0)

    cores = os.cpu_count() or 1
    t0 = time.perf_counter()
    ray.init(num_cpus=max(2, cores), include_dashboard=False, logging_level=logging.WARNING)
    cluster_s = time.perf_counter() - t0
    servers = [start_server(args.latency, args.capacity) for _ in range(2)]
    instant = start_server(0.0, 256)
    urls = [url for _, url in servers]
    C, L = args.capacity, args.latency
    try:
        cases = [  # (name, workers, servers used, client concurrency per actor)
            ("local executor", None, 1, C),
            ("ray, 1 worker", 1, 1, C),
            ("ray, 2 workers, 1 server", 2, 1, C // 2),
            ("ray, 2 workers, 2 servers", 2, 2, C),
        ]
        rows = []
        for name, workers, n_servers, conc in cases:
            summary, wall = run_case(src, args.work, urls[:n_servers], workers=workers, concurrency=conc)
            assert summary.vlm is not None
            pipe = summary.timings.pipeline_s
            ideal = n_servers * C / L
            rows.append({"case": name, "calls": summary.vlm.calls, "pipeline_s": pipe, "wall_s": wall,
                         "calls_per_s": summary.vlm.calls / pipe, "ideal": ideal,
                         "fraction": summary.vlm.calls / pipe / ideal})
        local, _ = run_case(src, args.work, [instant[1]], workers=None, concurrency=64)
        remote, remote_wall = run_case(src, args.work, [instant[1]], workers=1, concurrency=64)
    finally:
        for proc, _ in [*servers, instant]:
            proc.terminate()
            proc.wait()
        ray.shutdown()

    n = args.episodes
    print(f"Ray executor, {n} synthetic episodes, all modules; servers: L={L}s, C={C} each "
          f"(ideal = servers x C / L); {cores} cores, local Ray cluster start {cluster_s:.1f} s")
    print(f"{'case':<28}{'calls':>7}{'pipeline s':>12}{'wall s':>9}{'calls/s':>9}{'ideal':>7}{'fraction':>10}")
    for r in rows:
        print(f"{r['case']:<28}{r['calls']:>7}{r['pipeline_s']:>12.2f}{r['wall_s']:>9.2f}{r['calls_per_s']:>9.1f}"
              f"{r['ideal']:>7.0f}{r['fraction']:>10.2f}")
    per_ep_local = local.timings.pipeline_s / n
    per_ep_ray = remote.timings.pipeline_s / n
    overhead_ms = (per_ep_ray - per_ep_local) * 1000
    startup = remote.timings.total_s - remote.timings.pipeline_s - remote.timings.validate_write_s
    print(f"\ndriver overhead, instant server: local {per_ep_local * 1000:.1f} ms/episode, "
          f"1 Ray worker {per_ep_ray * 1000:.1f} ms/episode -> {overhead_ms:+.1f} ms/episode; "
          f"actor start-up (open, model check, modules) {startup:.1f} s per run (wall {remote_wall:.1f} s)")
    frac = {r["case"]: r["fraction"] for r in rows}
    print(
        f"RESULT local_fraction={frac['local executor']:.2f} ray1_fraction={frac['ray, 1 worker']:.2f} "
        f"ray2_1server_fraction={frac['ray, 2 workers, 1 server']:.2f} "
        f"ray2_2servers_fraction={frac['ray, 2 workers, 2 servers']:.2f} "
        f"driver_overhead_ms_per_episode={overhead_ms:.1f} actor_startup_s={startup:.1f}"
    )


if __name__ == "__main__":
    main()
