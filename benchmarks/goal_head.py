"""How well the goal head finds where a command ends, from cameras and words alone (issue 35).

Trains `steerable.policy.goal.GoalHead` by itself (its own embeddings start as a fresh tiny backbone's)
on the low-level items of a dataset's training episodes, as `steerable train` splits them (what
`steerable train --goal_pretrain_steps N` does before the policy trains; `steerable.policy.goal_training`),
and reports the error of the predicted goal's first two pose dimensions (x, y on the simulator, in the
state's units: metres there) on items of the held-out episodes. "far" items are those where the robot
stands more than `--far` (5 cm) from the goal: a command's start, where the goal can only come from the image.
Each reading is of the last step's weights and of their moving average (`--average`, the phase's
`goal_training.AVERAGE_DECAY`: what the phase reads and keeps); the RESULT line gives both.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/goal_head.py --data /tmp/easy200 --steps 2500

The dataset: `steerable make-dataset synthetic --out /tmp/easy200 --episodes 200 --with_language
--difficulty easy` (cameras, no privileged state). Not part of `make test`: minutes of CPU.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from steerable.dataset import open_dataset
from steerable.policy.averaging import WeightAverage
from steerable.policy.data import PolicyDataset, action_components
from steerable.policy.goal import GoalHead
from steerable.policy.goal_training import AVERAGE_DECAY, goal_errors, goal_items
from steerable.policy.setup import build_fresh
from steerable.recipes import load_recipe


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, help="a dataset with cameras and subtask rows")
    parser.add_argument("--steps", type=int, default=2500)
    parser.add_argument("--batch_size", type=int, default=64)
    parser.add_argument("--train_items", type=int, default=8000)
    parser.add_argument("--eval_items", type=int, default=800)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--image_size", type=int, default=32, help="the policy's (and so the head's) image size")
    parser.add_argument("--average", type=float, default=AVERAGE_DECAY,
                        help="decay of the weights' moving average that is read beside the last step's")
    parser.add_argument("--far", type=float, default=0.05, help="distance from the goal of a 'far' item (state units)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    dataset = open_dataset(args.data)
    built = build_fresh(dataset, {"goal_head": True, "image_size": args.image_size}, eval_fraction=0.1, seed=0)
    cfg, processor = built.model.cfg, built.processor
    pose = [s for _, s in cfg.pose_pairs]
    recipe = load_recipe("hierarchical")
    component = action_components(recipe)[0]
    sets = {}
    for name, episodes, count in (("train", built.train_episodes, args.train_items),
                                  ("eval", built.eval_episodes, args.eval_items)):
        data = PolicyDataset(dataset, recipe, cfg, processor.image_size, episodes=episodes, component=component)
        sets[name] = goal_items(data, processor, pose, count, seed=0, width=cfg.max_length)
    span = torch.tensor(np.array(processor.normalizer.state_max) - np.array(processor.normalizer.state_min),
                        dtype=torch.float32)[pose][:2] / 2  # normalised units -> state units
    torch.manual_seed(0)
    backbone = built.model.backbone
    head = GoalHead(cfg, backbone.hidden_size, backbone.vocab_size)
    with torch.no_grad():
        head.embed.weight.copy_(backbone.embed(torch.arange(backbone.vocab_size)))
    optimizer = torch.optim.AdamW(head.parameters(), lr=args.lr, weight_decay=0.01)
    average = WeightAverage(head, args.average)
    train, held = sets["train"], sets["eval"]
    started = time.perf_counter()
    far_items = int(((held.pose - held.goal)[:, :2] * span).norm(dim=-1).gt(args.far).sum())
    print(f"{len(train)} training items, {len(held)} held-out items ({far_items} far)")
    for step in range(1, args.steps + 1):
        pick = torch.randint(0, len(train), (args.batch_size,))
        loss = GoalHead.loss(head(train.images[pick], train.ids[pick], train.mask[pick]), train.goal[pick])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        average.update(step)
        if step % max(1, args.steps // 5) == 0 or step == args.steps:
            last = goal_errors(head, held, span, args.far)
            with average.applied():
                found = goal_errors(head, held, span, args.far)
            print(f"step {step}: loss {loss.item():.4f}, held-out far / near / all median: last step "
                  f"{_medians(last)}, average {_medians(found)} ({time.perf_counter() - started:.0f} s)", flush=True)
    print(f"RESULT image_size={args.image_size} steps={args.steps} far_median={found['goal_far_median']:.4f} "
          f"near_median={found['goal_near_median']:.4f} median={found['goal_median']:.4f} "
          f"last_step_median={last['goal_median']:.4f}")


def _medians(errors: dict[str, float]) -> str:
    return " / ".join(f"{errors[k]:.4f}" for k in ("goal_far_median", "goal_near_median", "goal_median"))


if __name__ == "__main__":
    main()
