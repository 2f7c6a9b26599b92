"""One `steerable annotate` run: open, run modules per episode, validate, write, summarize, push."""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from steerable.annotate.collect import EpisodeRows, split_rows, validate_episode
from steerable.annotate.config import AnnotateConfig
from steerable.annotate.engine import EpisodeResult, Progress
from steerable.annotate.executor import EpisodeJob, Executor, LocalExecutor
from steerable.annotate.module import ModuleCheck
from steerable.annotate.progress import ProgressDisplay
from steerable.annotate.registry import module_checks
from steerable.annotate.staging import Staging
from steerable.annotate.summary import (
    EpisodeFailure,
    RunSummary,
    Timings,
    WriteSummary,
    episode_producers,
    group_notes,
    module_counts,
    producers,
)
from steerable.annotate.workspace import Workspace, open_workspace
from steerable.dataset import EpisodeMeta, LeRobotDataset
from steerable.dataset.atomic import atomic_write_json
from steerable.dataset.layout import PROVENANCE_PATH
from steerable.dataset.lineage import missing_notice
from steerable.dataset.lock import RunLock
from steerable.dataset.provenance import is_heuristic, provenance_block
from steerable.dataset.summary import index_ranges
from steerable.errors import ConfigError
from steerable.language import checked_event_row, checked_persistent_row

if TYPE_CHECKING:
    from steerable.dataset.writer import WriteReport
    from steerable.vlm.protocol import VLMClient, VLMStats

__all__ = ["annotate"]

log = logging.getLogger(__name__)


def annotate(
    cfg: AnnotateConfig,
    *,
    debug: bool = False,
    vlm: VLMClient | None = None,
    executor: Executor | None = None,
) -> RunSummary:
    """Annotate the dataset `cfg` names; returns the run summary (also written as JSON).

    `vlm` injects a ready client instead of the one `cfg.vlm` describes: for library users with
    their own backend, and for in-process benchmarks. `executor` decides where episodes run
    (default: this process; `steerable.distributed.RayExecutor` for a Ray cluster).
    """
    started = time.monotonic()
    # A staging URL is checked first (protocol known, its package installed): before any download.
    chosen = Staging(cfg.staging_dir) if cfg.staging_dir is not None else None
    ws = open_workspace(cfg)
    staging = chosen or Staging(ws.work_dir / "staging")
    # Before anything is said about the episodes: a refused run prints its refusal alone.
    lock = RunLock.acquire(ws.work_dir, ws.out)  # before any check that contacts a model
    try:
        episodes = _unreviewed(ws.target, _select(ws.target, cfg.only_episodes), cfg.include_reviewed)
        return asyncio.run(_annotate(cfg, ws, episodes, staging, started, debug, vlm, executor or LocalExecutor()))
    finally:
        lock.release(ws.work_dir)


async def _annotate(
    cfg: AnnotateConfig,
    ws: Workspace,
    episodes: list[EpisodeMeta],
    staging: Staging,
    started: float,
    debug: bool,
    injected: VLMClient | None,
    executor: Executor,
) -> RunSummary:
    from steerable.vlm.backends import resolve_backend

    # The backend is decided here, once: `auto` becomes the name it picked, so the executor (and
    # every Ray actor) builds that backend instead of deciding again where it runs.
    backend = None if injected is not None else resolve_backend(cfg.vlm)
    if backend is not None:
        cfg = cfg.model_copy(update={"vlm": cfg.vlm.model_copy(update={"backend": backend})})
    # Checked before any model is contacted or started: config mistakes fail fast and cheap.
    stages = cfg.stages()
    has_model = injected is not None or backend is not None
    runnable = [s for s in stages if has_model or not s.needs_model]
    camera = _camera(cfg, ws.target, needs_video=any("video" in s.inputs for s in runnable))
    for stage in stages:  # every enabled module, also one a run without a model skips: a typo is a typo
        stage.check(ws.target, camera=camera)
    # The modules read the source: an existing --output_dir copy differs from it only in language,
    # and a failure (a missing video) then names the file the user can restore.
    job = EpisodeJob(cfg, ws.source.root, staging.root, camera, debug)
    async with executor.open(job, ws.source, injected) as session:
        names, notes = session.modules, session.notes
        progress = Progress()
        pipeline_started = time.monotonic()
        display = ProgressDisplay(
            progress, session, enabled=cfg.executor.progress, every_s=cfg.executor.progress_every_s
        )
        async with display:
            results = await session.run(episodes, progress)
        pipeline_s = time.monotonic() - pipeline_started
        model_id, stats = session.model_id, session.stats
    stage_of = {s.name: s for s in stages}
    model_of = {  # who produces each module's rows: the model, or None (heuristic)
        name: model_id if model_id is not None and stage_of[name].needs_model else None for name in names
    }
    write_started = time.monotonic()
    checks = module_checks(stages, names)
    replaces = {s.name: s.replaces(names) for s in stages if s.name in names}
    standins = {s.name: s.styles - replaces[s.name] for s in stages if s.name in names}
    for result in results:
        _drop_standins(result, standins, replaces)
    report = _validate_and_write(ws, results, checks, replaces, model_of, staging)
    summary = _summary(ws, results, names, [*notes, *_unrecorded_producers(ws)], report, stats, model_of)
    summary.timings = Timings(
        total_s=round(time.monotonic() - started, 3),
        pipeline_s=round(pipeline_s, 3),
        validate_write_s=round(time.monotonic() - write_started, 3),
        episode_mean_s=round(sum(r.seconds for r in results) / len(results), 4) if results else 0.0,
    )
    summary_path = Path(cfg.summary_path or ws.work_dir / "run_summary.json")
    summary.summary_path = str(summary_path)
    atomic_write_json(summary_path, summary.to_json())
    if cfg.push_to_hub:
        from steerable.dataset.hub import push_dataset

        repo_id = cfg.new_repo_id or cfg.repo_id
        assert repo_id is not None  # the config refuses --push_to_hub without one
        summary.push = push_dataset(ws.out, repo_id, private=cfg.push_private, commit_message=cfg.push_commit_message)
    return summary


def _select(ds: LeRobotDataset, only: list[int] | None) -> list[EpisodeMeta]:
    if only is None:
        return list(ds.episodes)
    known = {e.episode_index for e in ds.episodes}
    unknown = sorted(set(only) - known)
    if unknown:
        raise ConfigError(
            f"--only_episodes names episode(s) {index_ranges(unknown)} that {ds.root} does not have "
            f"(it has {index_ranges(sorted(known))})"
        )
    return [ds.episode(i) for i in sorted(set(only))]


def _unreviewed(ds: LeRobotDataset, episodes: list[EpisodeMeta], include: bool) -> list[EpisodeMeta]:
    """The episodes minus those a person reviewed or corrected (kept byte for byte), unless `include`."""
    from steerable.dataset.review import protected_episodes

    kept = protected_episodes(ds)
    if include or not kept:
        return episodes
    left = [e for e in episodes if e.episode_index not in kept]
    skipped = sorted(e.episode_index for e in episodes if e.episode_index in kept)
    if skipped:
        log.warning("leaving episode(s) %s as a person reviewed them (--include_reviewed true redoes them)",
                    index_ranges(skipped))
    return left


def _camera(cfg: AnnotateConfig, ds: LeRobotDataset, *, needs_video: bool) -> str | None:
    cameras = ds.camera_keys
    if cfg.vlm.camera_key is not None:
        if cfg.vlm.camera_key not in cameras:
            raise ConfigError(
                f"--vlm.camera_key {cfg.vlm.camera_key!r} is not a camera of {ds.root} (cameras: {cameras})"
            )
        return cfg.vlm.camera_key
    if needs_video and not cameras:
        raise ConfigError(
            f"{ds.root} has no video features, so the VLM modules have nothing to watch; "
            "run without a VLM (motion annotator only) or pick a dataset with videos"
        )
    return cameras[0] if cameras else None


def _drop_standins(
    result: EpisodeResult, standins: dict[str, frozenset[str | None]], replaces: dict[str, frozenset[str | None]]
) -> None:
    """A module's rows of a style it writes only as a stand-in (motion's subtasks for an episode
    without video, while plan runs) are dropped where another module that succeeded writes it."""
    owned = {style for name in result.outputs for style in replaces.get(name, ())}
    for name, out in result.outputs.items():
        dropped = standins.get(name, frozenset()) & owned
        if dropped and any(row.get("style") in dropped for row in out.rows):
            result.outputs[name] = replace(out, rows=[r for r in out.rows if r.get("style") not in dropped])


def _validate_and_write(
    ws: Workspace,
    results: list[EpisodeResult],
    checks: list[ModuleCheck],
    replaces: dict[str, frozenset[str | None]],
    model_of: dict[str, str | None],
    staging: Staging,
) -> WriteReport | None:
    """Check every episode's surviving rows; write those without problems (problems are logged, all
    of them, and the episode is marked failed with its first problem; its staged outputs are discarded,
    so a re-run asks again instead of failing on the same rows).

    `replaces`: module -> the stored styles its rows replace. An episode keeps its stored rows of
    every style no module that succeeded on it writes. Who wrote each style is recorded per episode
    (`model_of`: module -> its model id, None for a heuristic)."""
    from steerable.dataset.writer import EpisodeLanguage

    modules = list(replaces)
    ds = ws.target
    updates: dict[int, EpisodeLanguage] = {}
    for result in results:
        if not result.outputs:
            continue
        staged = [out.rows for out in result.outputs.values()]
        rows: EpisodeRows = split_rows(result.episode_index, staged)
        found = validate_episode(
            rows,
            [r for rs in staged for r in rs],
            frame_timestamps=ds.episode_timestamps(result.episode_index),
            cameras=ds.camera_keys,
            checks=checks,
            facts={"modules": modules, "dataset": ds},
        )
        if found:
            for problem in found:
                log.error("episode %d: %s", result.episode_index, problem)
            for name in result.outputs:
                result.failures[name] = f"validation: {len(found)} problem(s), first: {found[0]}"
                staging.discard(result.episode_index, name)
            result.outputs = {}
            continue
        replaced = {style for name in result.outputs for style in replaces.get(name, ())}
        replaced |= {row.get("style") for rs in staged for row in rs}
        updates[result.episode_index] = EpisodeLanguage(
            persistent=[checked_persistent_row(r) for r in rows.persistent],
            events=[(t, checked_event_row(r)) for t, r in rows.events],
            replaces=frozenset(replaced),
        )
    if not updates:
        return None
    written = [r for r in results if r.episode_index in updates]
    return ws.write(updates, producers=producers(model_of, written),
                    episode_producers=episode_producers(model_of, written))


def _unrecorded_producers(ws: Workspace) -> list[str]:
    """A note when the rows the dataset already had name no producer (LeRobot's dataset tools drop
    that record): this run's rows are recorded, theirs stay unknown until restored."""
    source = ws.source
    if not source.has_language or provenance_block(source.root, source.info) is not None:
        return []
    return [missing_notice(ws.out, [f"provenance of the language rows it already had ({PROVENANCE_PATH})"]) or ""]


def _summary(
    ws: Workspace,
    results: list[EpisodeResult],
    names: list[str],
    notes: list[str],
    report: WriteReport | None,
    stats: VLMStats | None,
    model_of: dict[str, str | None],
) -> RunSummary:
    failures = [
        EpisodeFailure(r.episode_index, r.failure or "", dict(r.failures), list(r.outputs), dict(r.permanent))
        for r in results
        if r.failures
    ]
    written = [r for r in results if r.outputs]
    wrote = producers(model_of, written)
    heuristic: dict[str, list[int]] = {}
    for episode, by_style in sorted(episode_producers(model_of, written).items()):
        for style, who in by_style.items():
            if is_heuristic(who):
                heuristic.setdefault(style, []).append(episode)
    return RunSummary(
        dataset=str(ws.source.root),
        output=str(ws.out),
        modules=names,
        episodes_selected=len(results),
        episodes_annotated=sum(1 for r in results if not r.failures),
        episodes_resumed=sum(1 for r in results if len(r.reused) == len(names) and not r.failures),
        failures=failures,
        heuristic_subtasks="heuristic:" in wrote.get("subtask", ""),
        producers=wrote,
        notes=group_notes(notes, {r.episode_index: _notes(r) for r in results}),
        per_module=module_counts(names, results),
        written=WriteSummary.of(report),
        vlm=stats,
        timings=Timings(),
        module_runs_resumed=sum(len(r.reused) for r in results),
        heuristic_episodes=dict(sorted(heuristic.items())),
    )


def _notes(result: EpisodeResult) -> list[str]:
    return [f"{name}: {note}" for name, staged in result.outputs.items() for note in staged.notes]
