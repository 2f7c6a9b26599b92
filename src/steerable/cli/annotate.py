"""`steerable annotate`: write subtasks, plans, memory, interjections, VQA and motion into a dataset."""

from __future__ import annotations

import argparse
import json
import sys

__all__ = ["register"]

USAGE = """usage: steerable annotate --root DIR [--output_dir OUT] [--vlm.base_url URL --vlm.model_id ID] [...]

Annotates every episode of a LeRobot v3 dataset. With a VLM (--vlm.base_url, or a local vLLM on a GPU)
the plan, interjections and vqa modules run; without one, the no-model motion annotator writes motion
rows and heuristic subtasks. Re-running the same command resumes. Every option, with its default:
"""


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "annotate", help="annotate a dataset with a VLM or the no-model motion annotator", add_help=False
    )
    # Every option is a dotted flag of the config tree, parsed by steerable.cli.flags.
    parser.set_defaults(func=run, pass_through=True)


def run(args: argparse.Namespace) -> int:
    from steerable.annotate.config import AnnotateConfig
    from steerable.annotate.run import annotate
    from steerable.cli.flags import flag_help, parse_config

    if any(o in ("-h", "--help") for o in args.options):
        print(USAGE + "\n" + flag_help(AnnotateConfig))
        return 0
    cfg = parse_config(AnnotateConfig, args.options)
    summary = annotate(cfg, debug=getattr(args, "debug", False))
    _report(summary)
    return 0


def _report(summary: dict) -> None:
    out = sys.stdout
    print(
        f"annotated {summary['episodes_annotated']}/{summary['episodes_selected']} episodes "
        f"({summary['episodes_resumed']} resumed from staging) with modules {', '.join(summary['modules'])}",
        file=out,
    )
    if summary["heuristic_subtasks"]:
        print("subtasks are HEURISTIC (derived from gripper events and pauses, no model)", file=out)
    for note in summary["notes"]:
        print(f"note: {note}", file=out)
    for failure in summary["failures"]:
        print(f"failed: episode {failure['episode_index']}: {failure['reason']}", file=out)
    print(f"output: {summary['output']}", file=out)
    print(f"summary: {summary['summary_path']}", file=out)
    if "push" in summary:
        print(f"pushed: {json.dumps(summary['push'])}", file=out)
