"""How well the goal head finds where a command ends, from cameras and words alone (issue 35).

Trains `steerable.policy.goal.GoalHead` by itself (with its own copy of a fresh tiny backbone's token
embeddings) on the low-level items of a dataset's training episodes, as `steerable train` splits them,
and reports the error of the predicted goal's first two pose dimensions (x, y on the simulator, in the
state's units: metres there) on items of the held-out episodes. "far" items are those where the robot
stands more than `--far` from the goal: a command's start, where the goal can only come from the image.

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
from steerable.policy.data import PolicyDataset, action_components
from steerable.policy.goal import GoalHead
from steerable.policy.setup import build_fresh
from steerable.recipes import load_recipe
from steerable.train import collate


def items(data: PolicyDataset, processor: object, pose: list[int], count: int, seed: int, width: int
          ) -> dict[str, torch.Tensor]:
    """`count` random low-level items with a known goal: images, token ids and mask, goal, current pose."""
    rng = np.random.default_rng(seed)
    pick = rng.choice(len(data.positions), size=min(count, len(data.positions)), replace=False)
    parts: dict[str, list[torch.Tensor]] = {k: [] for k in ("images", "ids", "mask", "goal", "pose")}
    for j in range(0, len(pick), 64):
        batch = processor.training_batch(collate([data[int(i)] for i in pick[j:j + 64]]))  # type: ignore[attr-defined]
        goal = batch["goal"][:, pose]
        known = torch.isfinite(goal).all(-1)
        parts["images"].append(batch["images"][known])
        parts["goal"].append(goal[known])
        parts["pose"].append(batch["state"][known][:, pose])
        ids, mask = batch["input_ids"][known], batch["attention_mask"][known]
        parts["ids"].append(torch.nn.functional.pad(ids, (0, width - ids.shape[1])))
        parts["mask"].append(torch.nn.functional.pad(mask, (0, width - mask.shape[1])))
    out = {k: torch.cat(v) for k, v in parts.items()}
    longest = int(out["mask"].sum(1).max())
    out["ids"], out["mask"] = out["ids"][:, :longest], out["mask"][:, :longest]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, help="a dataset with cameras and subtask rows")
    parser.add_argument("--steps", type=int, default=2500)
    parser.add_argument("--batch_size", type=int, default=64)
    parser.add_argument("--train_items", type=int, default=8000)
    parser.add_argument("--eval_items", type=int, default=800)
    parser.add_argument("--far", type=float, default=0.05, help="distance from the goal of a 'far' item")
    parser.add_argument("--lr", type=float, default=1e-3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    dataset = open_dataset(args.data)
    built = build_fresh(dataset, {"goal_head": True}, eval_fraction=0.1, seed=0)
    cfg, processor = built.model.cfg, built.processor
    pose = [s for _, s in cfg.pose_pairs]
    recipe = load_recipe("hierarchical")
    component = action_components(recipe)[0]
    sets = {}
    for name, episodes, count in (("train", built.train_episodes, args.train_items),
                                  ("eval", built.eval_episodes, args.eval_items)):
        data = PolicyDataset(dataset, recipe, cfg, processor.image_size, episodes=episodes, component=component)
        sets[name] = items(data, processor, pose, count, seed=0, width=cfg.max_length)
    span = torch.tensor(np.array(processor.normalizer.state_max) - np.array(processor.normalizer.state_min),
                        dtype=torch.float32)[pose][:2] / 2  # normalised units -> state units
    torch.manual_seed(0)
    backbone = built.model.backbone
    head = GoalHead(cfg, backbone.hidden_size)
    embed = torch.nn.Embedding.from_pretrained(backbone.embed(torch.arange(backbone.vocab_size)).detach().clone(),
                                               freeze=False)
    optimizer = torch.optim.AdamW([*head.parameters(), *embed.parameters()], lr=args.lr, weight_decay=0.01)
    train, held = sets["train"], sets["eval"]

    def errors() -> tuple[float, float, float]:
        head.eval()
        with torch.no_grad():
            guess = torch.cat([head(held["images"][j:j + 128], embed(held["ids"][j:j + 128]), held["mask"][j:j + 128])
                               for j in range(0, len(held["goal"]), 128)])
        head.train()
        miss = ((guess - held["goal"])[:, :2] * span).norm(dim=-1)
        far = ((held["pose"] - held["goal"])[:, :2] * span).norm(dim=-1) > args.far
        return float(miss[far].median()), float(miss[far].quantile(0.9)), float(miss[~far].median())

    started = time.perf_counter()
    print(f"{len(train['goal'])} training items, {len(held['goal'])} held-out items "
          f"({int(((held['pose'] - held['goal'])[:, :2] * span).norm(dim=-1).gt(args.far).sum())} far)")
    for step in range(1, args.steps + 1):
        pick = torch.randint(0, len(train["goal"]), (args.batch_size,))
        guess = head(train["images"][pick], embed(train["ids"][pick]), train["mask"][pick])
        loss = GoalHead.loss(guess, train["goal"][pick])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % max(1, args.steps // 5) == 0 or step == args.steps:
            far, far90, near = errors()
            print(f"step {step}: loss {loss.item():.4f}, held-out far median {far:.4f} p90 {far90:.4f}, "
                  f"near median {near:.4f} ({time.perf_counter() - started:.0f} s)", flush=True)
    far, far90, near = errors()
    print(f"RESULT steps={args.steps} far_median={far:.4f} far_p90={far90:.4f} near_median={near:.4f}")


if __name__ == "__main__":
    main()
