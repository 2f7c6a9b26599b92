"""One `steerable annotate` run: open, run modules per episode, validate, write, summarize, push."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from steerable.annotate.collect import EpisodeRows, split_rows, validate_episode
from steerable.annotate.config import AnnotateConfig
from steerable.annotate.engine import EpisodeResult, Progress, run_episodes
from steerable.annotate.module import AnnotationModule, ModuleCheck
from steerable.annotate.progress import ProgressDisplay, vlm_counters
from steerable.annotate.registry import build_modules, module_checks
from steerable.annotate.staging import Staging
from steerable.annotate.workspace import Workspace, open_workspace
from steerable.dataset import EpisodeMeta, LeRobotDataset
from steerable.dataset.atomic import atomic_write_json
from steerable.errors import ConfigError

__all__ = ["annotate"]

log = logging.getLogger(__name__)


def annotate(cfg: AnnotateConfig, *, debug: bool = False, vlm: Any | None = None) -> dict[str, Any]:
    """Annotate the dataset `cfg` names; returns the run summary (also written as JSON).

    `vlm` injects a ready client (anything with the `VLMClient` methods) instead of the one
    `cfg.vlm` describes: for library users with their own backend, and for in-process benchmarks.
    """
    started = time.monotonic()
    ws = open_workspace(cfg)
    episodes = _select(ws.target, cfg.only_episodes)
    staging = Staging(cfg.staging_dir or ws.work_dir / "staging")
    return asyncio.run(_annotate(cfg, ws, episodes, staging, started, debug, vlm))


async def _annotate(
    cfg: AnnotateConfig,
    ws: Workspace,
    episodes: list[EpisodeMeta],
    staging: Staging,
    started: float,
    debug: bool,
    injected: Any | None,
) -> dict[str, Any]:
    from steerable.vlm.factory import resolve_backend

    source, target = ws.source, ws.target
    # Checked before any model is contacted or started: config mistakes fail fast and cheap.
    stages = cfg.stages()
    has_model = injected is not None or resolve_backend(cfg.vlm) is not None
    runnable = [s for s in stages if has_model or not s.needs_model]
    camera = _camera(cfg, target, needs_video=any("video" in s.inputs for s in runnable))
    for stage in runnable:
        stage.check(target, camera=camera)
    async with _model(cfg, injected) as vlm:
        modules, notes = build_modules(stages, vlm)
        progress = Progress()
        pipeline_started = time.monotonic()
        async with ProgressDisplay(progress, vlm, enabled=cfg.executor.progress):
            results = await run_episodes(
                target, episodes, modules, staging, seed=cfg.seed, vlm=vlm, camera=camera,
                parallelism=cfg.executor.episode_parallelism, force=cfg.force, progress=progress,
                debug=debug,
            )
        pipeline_s = time.monotonic() - pipeline_started
        counters = vlm_counters(vlm)
    write_started = time.monotonic()
    written, problems = _validate_and_write(ws, results, module_checks(stages, [m.name for m in modules]), modules)
    summary = _summary(cfg, source, ws.out, results, modules, notes, problems, written, counters, started)
    summary["timings"]["pipeline_s"] = round(pipeline_s, 3)
    summary["timings"]["validate_write_s"] = round(time.monotonic() - write_started, 3)
    summary_path = cfg.summary_path or ws.work_dir / "run_summary.json"
    atomic_write_json(Path(summary_path), summary)
    summary["summary_path"] = str(summary_path)
    if cfg.push_to_hub:
        from steerable.dataset.hub import push_dataset

        repo_id = cfg.new_repo_id or cfg.repo_id
        assert repo_id is not None  # the config refuses --push_to_hub without one
        summary["push"] = push_dataset(
            ws.out, repo_id, private=cfg.push_private, commit_message=cfg.push_commit_message
        )
    return summary


@contextlib.asynccontextmanager
async def _model(cfg: AnnotateConfig, injected: Any | None) -> AsyncIterator[Any | None]:
    """The VLM client, or None when `--vlm.backend auto` finds no model (motion-only run)."""
    from steerable.vlm.factory import open_vlm, resolve_backend

    if injected is not None:
        yield injected
        return
    if resolve_backend(cfg.vlm) is None:
        yield None
        return
    async with open_vlm(cfg.vlm) as vlm:
        yield vlm


def _select(ds: LeRobotDataset, only: list[int] | None) -> list[EpisodeMeta]:
    if only is None:
        return list(ds.episodes)
    known = {e.episode_index for e in ds.episodes}
    unknown = sorted(set(only) - known)
    if unknown:
        raise ConfigError(f"--only_episodes names episode(s) {unknown} that {ds.root} does not have")
    return [ds.episode(i) for i in sorted(set(only))]


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


def _validate_and_write(
    ws: Workspace,
    results: list[EpisodeResult],
    checks: list[ModuleCheck],
    modules: list[AnnotationModule],
) -> tuple[dict[str, Any], dict[int, list[str]]]:
    """Check every finished episode; write those without problems. Problems are logged, all of them."""
    from steerable.dataset.writer import EpisodeLanguage

    ds = ws.target

    updates: dict[int, EpisodeLanguage] = {}
    problems: dict[int, list[str]] = {}
    for result in results:
        if result.failure:
            continue
        staged = [out.rows for out in result.outputs.values()]
        rows: EpisodeRows = split_rows(result.episode_index, staged)
        found = validate_episode(
            rows,
            [r for rs in staged for r in rs],
            frame_timestamps=ds.episode_timestamps(result.episode_index),
            cameras=ds.camera_keys,
            checks=checks,
            facts={"modules": [m.name for m in modules], "dataset": ds},
        )
        if found:
            problems[result.episode_index] = found
            for problem in found:
                log.error("episode %d: %s", result.episode_index, problem)
            continue
        updates[result.episode_index] = EpisodeLanguage(persistent=rows.persistent, events=rows.events)
    if not updates:
        return {"episodes": 0, "shards": []}, problems
    report = ws.write(updates)
    return _report_dict(report), problems


def _report_dict(report: Any) -> dict[str, Any]:
    data = dict(vars(report)) if not hasattr(report, "model_dump") else report.model_dump()
    return {k: ([str(p) for p in v] if isinstance(v, list | tuple) else v) for k, v in data.items()}


def _summary(
    cfg: AnnotateConfig,
    source: LeRobotDataset,
    output: Path,
    results: list[EpisodeResult],
    modules: list[AnnotationModule],
    notes: list[str],
    problems: dict[int, list[str]],
    written: dict[str, Any],
    counters: dict[str, float],
    started: float,
) -> dict[str, Any]:
    failures = [{"episode_index": r.episode_index, "reason": r.failure} for r in results if r.failure]
    failures += [
        {"episode_index": ep, "reason": f"validation: {len(msgs)} problem(s), first: {msgs[0]}"}
        for ep, msgs in sorted(problems.items())
    ]
    per_module: dict[str, Any] = {}
    episode_notes: dict[str, list[str]] = {}
    for module in modules:
        styles: Counter[str] = Counter()
        count = 0
        for r in results:
            staged = r.outputs.get(module.name)
            if staged is None:
                continue
            count += 1
            styles.update(str(row.get("style") or "tool_call") for row in staged.rows)
            for note in staged.notes:
                episode_notes.setdefault(note, []).append(str(r.episode_index))
        per_module[module.name] = {"episodes": count, "rows_by_style": dict(sorted(styles.items()))}
    annotated = [r.episode_index for r in results if not r.failure and r.episode_index not in problems]
    heuristic = any(
        (r.outputs.get("motion") and r.outputs["motion"].meta.get("heuristic_subtasks")) for r in results
    )
    seconds = [r.seconds for r in results]
    return {
        "dataset": str(source.root),
        "output": str(output),
        "modules": [m.name for m in modules],
        "episodes_selected": len(results),
        "episodes_annotated": len(annotated),
        "episodes_resumed": sum(1 for r in results if r.reused and len(r.reused) == len(modules)),
        "failures": failures,
        "heuristic_subtasks": bool(heuristic),
        "notes": notes + [f"{note} (episodes {', '.join(eps)})" for note, eps in episode_notes.items()],
        "per_module": per_module,
        "written": written,
        "vlm": counters,
        "timings": {
            "total_s": round(time.monotonic() - started, 3),
            "episode_mean_s": round(sum(seconds) / len(seconds), 4) if seconds else 0.0,
        },
    }
