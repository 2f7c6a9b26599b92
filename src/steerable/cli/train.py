"""`steerable train --dataset DIR --output_dir CKPT`: train the hierarchical policy on a recipe."""

from __future__ import annotations

import argparse
import dataclasses
import math
from pathlib import Path
from typing import Any

__all__ = ["register"]

_POLICY_HELP = {
    "backbone": "'tiny' (built in code, random weights) or a local folder with a SmolVLM/Idefics3 model",
    "cameras": "comma-separated camera keys (default: every camera of the dataset)",
    "state_mode": "bins (256-bin state tokens), projector (one state token), or none",
    "expert_layers": "how many of the last backbone layers the action expert reads",
    "freeze_vision": "true: do not train the vision encoder",
    "chunk_size": "actions predicted per chunk",
    "flow_steps": "Euler steps when sampling an action chunk",
}


def register(sub: argparse._SubParsersAction) -> None:
    from steerable.policy.config import PolicyConfig

    parser = sub.add_parser(
        "train", help="train the hierarchical vision-language-action policy on a recipe",
        description="Train steerable's hierarchical policy (text head + flow-matching action expert) on an "
        "annotated LeRobot dataset, rendered through a recipe. Resumes when --output_dir holds a checkpoint.",
    )
    parser.add_argument("--dataset", required=True, type=Path, help="annotated LeRobot v3 dataset folder")
    parser.add_argument("--output_dir", required=True, type=Path, help="where checkpoints and logs.jsonl go")
    parser.add_argument("--recipe", default="hierarchical", help="built-in recipe name or YAML path")
    parser.add_argument("--steps", type=int, default=2500, help="optimizer steps (default 2500)")
    parser.add_argument("--batch_size", type=int, default=32, help="samples per step (default 32)")
    parser.add_argument("--lr", type=float, default=1e-3, help="peak learning rate (default 1e-3)")
    parser.add_argument("--device", default="cpu", help="cpu or cuda[:N] (bf16 autocast on cuda)")
    parser.add_argument("--eval_every", type=int, default=500, help="steps between held-out evaluations")
    parser.add_argument("--save_every", type=int, default=500, help="steps between checkpoints")
    parser.add_argument("--eval_fraction", type=float, default=0.1, help="share of episodes held out")
    parser.add_argument("--num_workers", type=int, default=0, help="DataLoader worker processes")
    parser.add_argument("--event_repeat", type=int, default=16,
                        help="extra samples per event frame (interjection, spoken reply) for the components "
                             "that read events (default 16; 0: none)")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch CPU threads (default: 1 for the tiny backbone, torch's default otherwise)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no_progress", action="store_true", help="no progress bar")
    parser.add_argument("--push_to_hub", metavar="REPO_ID", help="upload the final checkpoint to this Hub model repo")
    parser.add_argument("--private", action="store_true", help="with --push_to_hub: create the repo private")
    defaults = PolicyConfig()
    for f in dataclasses.fields(PolicyConfig):
        if f.name in ("state_dim", "action_dim"):
            continue  # read from the dataset
        value = getattr(defaults, f.name)
        kind = str if isinstance(value, (str, list)) else _bool if isinstance(value, bool) else type(value)
        parser.add_argument(f"--policy.{f.name}", dest=f"policy__{f.name}", type=kind, default=None, metavar="V",
                            help=f"{_POLICY_HELP.get(f.name, '')} (default {value!r})".strip())
    parser.set_defaults(func=run)


def _bool(text: str) -> bool:
    from steerable.errors import ConfigError

    if text.lower() in ("1", "true", "yes"):
        return True
    if text.lower() in ("0", "false", "no"):
        return False
    raise ConfigError(f"expected true or false, got {text!r}")


def run(args: argparse.Namespace) -> int:
    from steerable.errors import MissingExtraError

    try:
        from steerable.policy.hub import push_checkpoint
        from steerable.policy.trainer import TrainConfig, train
    except ImportError as exc:
        raise MissingExtraError(exc.name or "torch", "policy") from exc
    overrides: dict[str, Any] = {}
    for key, value in vars(args).items():
        if key.startswith("policy__") and value is not None:
            name = key[len("policy__"):]
            overrides[name] = [c.strip() for c in value.split(",") if c.strip()] if name == "cameras" else value
    cfg = TrainConfig(
        dataset=args.dataset, output_dir=args.output_dir, recipe=args.recipe, policy=overrides, steps=args.steps,
        batch_size=args.batch_size, lr=args.lr, device=args.device, eval_every=args.eval_every,
        save_every=args.save_every, eval_fraction=args.eval_fraction, num_workers=args.num_workers, seed=args.seed,
        event_repeat=args.event_repeat, threads=args.threads, progress=not args.no_progress,
    )
    summary = train(cfg)
    m = summary["metrics"]
    line = f"trained {summary['steps']} steps in {summary['seconds']:.0f} s; checkpoint {summary['checkpoint']}"
    if summary["resumed_from"]:
        line += f" (resumed from {summary['resumed_from']})"
    print(line)
    if "eval_exact_match" in m and not math.isnan(m["eval_exact_match"]):
        print(f"held-out: text exact match {m['eval_exact_match']:.2f} (majority baseline "
              f"{m['eval_majority_baseline']:.2f}), text loss {m['eval_text_loss']:.3f}, "
              f"flow loss {m['eval_flow_loss']:.3f}")
    if args.push_to_hub:
        url = push_checkpoint(Path(summary["checkpoint"]), args.push_to_hub, private=args.private)
        print(f"pushed to {url}")
    return 0
