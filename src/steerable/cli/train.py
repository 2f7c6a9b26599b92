"""`steerable train --dataset DIR --output_dir CKPT`: train the hierarchical policy on a recipe."""

from __future__ import annotations

import argparse
import math
from pathlib import Path

__all__ = ["register"]

USAGE = """usage: steerable train --dataset DIR --output_dir CKPT [--recipe NAME|FILE.yaml] [--steps N] [--policy.* ...]

Train steerable's hierarchical policy (text head + flow-matching action expert) on an annotated LeRobot
dataset, rendered through a recipe. Resumes when --output_dir holds a checkpoint. Every option, with its
default:
"""


def register(sub: argparse._SubParsersAction) -> None:
    from steerable.cli.flags import add_command

    add_command(sub, "train", help="train the hierarchical vision-language-action policy on a recipe", func=run)


def run(args: argparse.Namespace) -> int:
    from steerable.cli.flags import parse_command
    from steerable.errors import MissingExtraError
    from steerable.policy.settings import TrainSettings

    cfg = parse_command(TrainSettings, args, USAGE)
    if cfg is None:
        return 0
    try:
        from steerable.policy.hub import push_checkpoint
        from steerable.policy.trainer import train
    except ImportError as exc:
        raise MissingExtraError(exc.name or "torch", "policy") from exc
    summary = train(cfg)
    if not summary.get("main", True):  # under torchrun: rank 0 reports (and pushes) for the job
        return 0
    m = summary["metrics"]
    line = f"trained {summary['steps']} steps in {summary['seconds']:.0f} s; checkpoint {summary['checkpoint']}"
    if summary["resumed_from"]:
        line += f" (resumed from {summary['resumed_from']})"
    if summary.get("time_budget_ended"):
        line += f"; --time_budget {cfg.time_budget:g} s ({cfg.time_clock}) ended it before --steps {cfg.steps}"
    print(line)
    if "eval_exact_match" in m and not math.isnan(m["eval_exact_match"]):
        print(f"held-out: text exact match {m['eval_exact_match']:.2f} (majority baseline "
              f"{m['eval_majority_baseline']:.2f}), text loss {m['eval_text_loss']:.3f}, "
              f"flow loss {m['eval_flow_loss']:.3f}")
    if cfg.push_to_hub:
        url = push_checkpoint(Path(summary["checkpoint"]), cfg.push_to_hub, private=cfg.private)
        print(f"pushed to {url}")
    return 0
