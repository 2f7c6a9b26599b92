"""`steerable annotate`: write subtasks, plans, memory, interjections, VQA and motion into a dataset.

Exit status: 0 when every selected episode was annotated by every module, 1 when the run finished
but some episodes are missing some or all rows (named on the last lines; `--allow_failures` makes
this 0), 2 for an error that stopped the run before anything was written.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from steerable.annotate.summary import EpisodeFailure, RunSummary

__all__ = ["PARTIAL_EXIT", "register"]

PARTIAL_EXIT = 1

USAGE = """usage: steerable annotate DATASET|--root DIR [--output_dir OUT] [--vlm.base_url URL --vlm.model_id ID] [...]

Annotates every episode of a LeRobot v3 dataset. With a VLM (--vlm.base_url, or a local vLLM on a GPU)
the plan, interjections and vqa modules run; without one, the no-model motion annotator writes motion
rows and heuristic subtasks. Re-running the same command resumes. Exit status: 0 all episodes
annotated, 1 some episodes failed (--allow_failures: 0), 2 nothing was run. Every option, with its default:
"""


def register(sub: argparse._SubParsersAction) -> None:
    from steerable.cli.flags import add_command

    add_command(sub, "annotate", help="annotate a dataset with a VLM or the no-model motion annotator", func=run)


def run(args: argparse.Namespace) -> int:
    from steerable.annotate.config import AnnotateConfig
    from steerable.cli.flags import parse_command

    cfg = parse_command(AnnotateConfig, args, USAGE)
    if cfg is None:
        return 0
    from steerable.annotate.run import annotate

    executor = None
    if cfg.executor.backend == "ray":
        from steerable.distributed import RayExecutor

        executor = RayExecutor(cfg.executor)
    summary = annotate(cfg, debug=args.debug, executor=executor)
    _report(summary, cfg.only_episodes)
    return 0 if summary.complete or cfg.allow_failures else PARTIAL_EXIT


def _report(summary: RunSummary, only: list[int] | None) -> None:
    out = sys.stdout
    runs = summary.episodes_selected * len(summary.modules)
    whole = f"{summary.episodes_resumed} whole episode{'' if summary.episodes_resumed == 1 else 's'}"
    resumed = f"resumed from staging: {summary.module_runs_resumed} of {runs} module runs, {whole}"
    print(
        f"annotated {summary.episodes_annotated}/{summary.episodes_selected} episodes ({resumed}) "
        f"with modules {', '.join(summary.modules)}",
        file=out,
    )
    if summary.heuristic_subtasks:
        if all(p.startswith("heuristic:") for p in summary.producers.get("subtask", "").split(" + ")):
            print("subtasks are HEURISTIC (derived from gripper events and pauses, no model)", file=out)
        else:
            print("some subtasks are HEURISTIC: those of episodes without video (see the notes)", file=out)
    for note in summary.notes:
        print(f"note: {note}", file=out)
    print(f"output: {summary.output}", file=out)
    print(f"summary: {summary.summary_path}", file=out)
    if summary.push is not None:
        print(f"pushed: {json.dumps(summary.push)}", file=out)
    # Last, so a script's `tail` shows them: what is missing, episode by episode.
    for failure in summary.failures:
        kept = f" (kept: {', '.join(failure.written_modules)})" if failure.written_modules else ""
        print(f"failed: episode {failure.episode_index}: {failure.reason}{kept}", file=out)
    retryable = [f for f in summary.failures if not f.permanent]
    if retryable:
        print(
            f"{len(retryable)} of {summary.episodes_selected} episodes are not fully annotated for a reason "
            "a re-run may not meet again (the VLM server, the network, the disk); re-run the same command "
            "to retry them (finished work is resumed)",
            file=out,
        )
    lasting = [f for f in summary.failures if f.permanent]
    if lasting:  # the very last line: what a re-run cannot fix, and what to do instead
        print(_cannot_succeed(summary, lasting, only), file=out)


def _cannot_succeed(summary: RunSummary, lasting: list[EpisodeFailure], only: list[int] | None) -> str:
    """The episodes a re-run fails again, grouped by cause, and the two ways on: leave them out, or
    accept them (exit 0 with the rows they got)."""
    from steerable.dataset import LeRobotDataset
    from steerable.dataset.summary import index_ranges

    by_cause: dict[str, list[int]] = {}
    for failure in lasting:  # an episode under the first of its causes, in module order
        by_cause.setdefault(next(iter(failure.permanent.values())), []).append(failure.episode_index)
    causes = "; ".join(f"{cause}: {index_ranges(eps)}" for cause, eps in by_cause.items())
    chosen = only if only is not None else [e.episode_index for e in LeRobotDataset(summary.dataset).episodes]
    keep = sorted(set(chosen) - {f.episode_index for f in lasting})
    leave_out = f"leave them out with --episodes {index_ranges(keep).replace(' ', '')}, " if keep else ""
    return (
        f"{len(lasting)} of {summary.episodes_selected} episodes cannot succeed as {summary.dataset} is "
        f"({causes}), so a re-run fails them again: {leave_out}"
        "or accept them as they are with --allow_failures (exit 0)"
    )
