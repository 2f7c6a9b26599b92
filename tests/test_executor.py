"""The executor seam: the local executor's session, and counters merged across workers."""

from __future__ import annotations

import asyncio
from pathlib import Path

from annotate_helpers import copy_dataset, make_synthetic
from steerable.annotate.config import AnnotateConfig
from steerable.annotate.engine import Progress
from steerable.annotate.executor import EpisodeJob, LocalExecutor, merge_stats
from steerable.dataset import LeRobotDataset


def test_counters_of_several_workers_merge_into_one() -> None:
    a = {"calls": 3, "succeeded": 2, "failures": 1, "retries": 4, "in_flight": 1, "max_in_flight": 5,
         "prompt_tokens": 10, "completion_tokens": 7, "request_bytes": 100, "reasons": {"timeout": 2}}
    b = {"calls": 2, "succeeded": 2, "max_in_flight": 8, "request_bytes": 50, "reasons": {"timeout": 1, "schema": 1}}
    total = merge_stats([a, b, {}])
    assert (total.calls, total.succeeded, total.failures, total.retries) == (5, 4, 1, 4)
    assert total.max_in_flight == 8 and total.request_bytes == 150 and total.in_flight == 1
    assert total.reasons == {"timeout": 3, "schema": 1}


def test_local_session_runs_the_pipeline_without_a_model(tmp_path: Path) -> None:
    root = copy_dataset(make_synthetic(tmp_path / "src", episodes=2), tmp_path / "ds")
    cfg = AnnotateConfig(root=root, executor={"progress": False})
    ds = LeRobotDataset(root)
    job = EpisodeJob(cfg, root, tmp_path / "staging", camera=None)

    async def go() -> tuple[list[str], list[str], object, list[int], Progress]:
        progress = Progress()
        async with LocalExecutor().open(job, ds, None) as session:
            results = await session.run(list(reversed(ds.episodes)), progress)
            return session.modules, session.notes, session.stats, [r.episode_index for r in results], progress

    modules, notes, stats, order, progress = asyncio.run(go())
    assert modules == ["motion"] and notes and stats is None  # no model: motion only, with a note
    assert order == [1, 0]  # results in the order asked
    assert (progress.total, progress.done, progress.failed) == (2, 2, 0)
    assert sorted(p.name for p in (tmp_path / "staging").iterdir()) == ["episode_000000", "episode_000001"]
