"""The goal head's own phase: trained alone before the policy, then held fixed (issue 35).

Inside the joint training the head never left the slow first phase it goes through alone (its
held-out error stayed at chance, docs/policy.md "From pixels"), while alone, on the same items, it
finds the named thing to about a centimetre. So `steerable train --goal_pretrain_steps N` first
trains the head by itself, on low-level items of the training episodes decoded once (`goal_items`),
with its own optimizer at a constant learning rate, and then freezes it: the policy then learns to
act from an estimate that already points at the right place, and a training step costs no backward
pass through the head. The head reads its own copy of the token embeddings (`GoalHead.embed`), so
the text loss moving the backbone's does not move what the frozen head reads.

Whether the head finds the named thing or memorises its items was a matter of luck of its length
(docs/policy.md, "From pixels"), so the phase reads the head on the held-out episodes every
`check_every` steps and keeps the best weights, and with `--policy.image_shift N` its training
images move as the policy's do (memorising shifted images is harder than finding the thing).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import numpy as np
import torch

from steerable.dataset import LeRobotDataset
from steerable.policy.data import PolicyDataset, action_components
from steerable.policy.goal import GoalHead
from steerable.policy.model import HierarchicalPolicy
from steerable.policy.processor import Processor, shift_images
from steerable.recipes import Recipe
from steerable.train import collate

__all__ = ["GoalItems", "freeze_goal", "goal_errors", "goal_items", "pretrain_goal"]

log = logging.getLogger(__name__)

@dataclass(frozen=True)
class GoalItems:
    """Low-level items with a known goal: images, command token ids and mask, goal and pose (normalised)."""

    images: torch.Tensor
    ids: torch.Tensor
    mask: torch.Tensor
    goal: torch.Tensor
    pose: torch.Tensor

    def __len__(self) -> int:
        return len(self.goal)


def goal_items(data: PolicyDataset, processor: Processor, pose: list[int], count: int, seed: int,
               width: int) -> GoalItems:
    """`count` random items of `data` (a low-level component's) whose goal is known, decoded once."""
    rng = np.random.default_rng(seed)
    pick = rng.choice(len(data), size=min(count, len(data)), replace=False)
    parts: dict[str, list[torch.Tensor]] = {k: [] for k in ("images", "ids", "mask", "goal", "pose")}
    for j in range(0, len(pick), 64):
        collated = collate([data[int(i)] for i in pick[j:j + 64]])
        if collated is None:  # no frame of these could be read
            continue
        batch = processor.training_batch(collated)
        goal = batch["goal"][:, pose]
        known = torch.isfinite(goal).all(-1)
        parts["images"].append(batch["images"][known])
        parts["goal"].append(goal[known])
        parts["pose"].append(batch["state"][known][:, pose])
        ids, mask = batch["input_ids"][known], batch["attention_mask"][known]
        parts["ids"].append(torch.nn.functional.pad(ids, (0, width - ids.shape[1])))
        parts["mask"].append(torch.nn.functional.pad(mask, (0, width - mask.shape[1])))
    out = {k: torch.cat(v) for k, v in parts.items()}
    longest = max(int(out["mask"].sum(1).max()), 1) if len(out["mask"]) else 1
    return GoalItems(out["images"], out["ids"][:, :longest], out["mask"][:, :longest], out["goal"], out["pose"])


def goal_errors(head: GoalHead, items: GoalItems, span: torch.Tensor, far: float | None = None) -> dict[str, float]:
    """Median and 90th percentile of the error of the goal's first two pose dimensions (state units);
    with `far`, also the medians of the items whose pose is more than `far` from the goal (as at a
    command's start, where only the image can tell where to go) and of the others."""
    was = head.training
    head.eval()
    with torch.no_grad():
        guess = torch.cat([head(items.images[j:j + 128], items.ids[j:j + 128], items.mask[j:j + 128])
                           for j in range(0, len(items), 128)])
    head.train(was)
    miss = ((guess - items.goal)[:, :2] * span).norm(dim=-1)
    out = {"goal_median": float(miss.median()), "goal_p90": float(miss.quantile(0.9))}
    if far is not None:
        away = ((items.pose - items.goal)[:, :2] * span).norm(dim=-1) > far
        out["goal_far_median"] = float(miss[away].median()) if away.any() else float("nan")
        out["goal_near_median"] = float(miss[~away].median()) if (~away).any() else float("nan")
    return out


def pretrain_goal(model: HierarchicalPolicy, processor: Processor, dataset: LeRobotDataset, recipe: Recipe,
                  episodes: tuple[list[int], list[int]], steps: int, *, items: int = 8000, batch_size: int = 64,
                  lr: float = 1e-3, seed: int = 0, check_every: int = 500) -> dict[str, float]:
    """Train `model.goal` alone for `steps` (its training images shifted as `--policy.image_shift` says),
    keep the weights that did best on the held-out episodes, freeze it, and return their held-out errors
    (state units) and the step they came from."""
    head = model.goal
    if head is None:
        return {}
    cfg = model.cfg
    pose = [s for _, s in cfg.pose_pairs]
    component = action_components(recipe)[0]
    train_eps, eval_eps = episodes
    started = time.perf_counter()
    sets = [goal_items(PolicyDataset(dataset, recipe, cfg, processor.image_size, eps, component=component),
                       processor, pose, n, seed, cfg.max_length)
            for eps, n in ((train_eps, items), (eval_eps, max(items // 10, 1)))]
    train, held = sets
    span = torch.tensor(np.array(processor.normalizer.state_max) - np.array(processor.normalizer.state_min),
                        dtype=torch.float32)[pose][:2] / 2  # normalised units -> state units
    device = next(head.parameters()).device
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.AdamW(head.parameters(), lr=lr, weight_decay=0.01)
    held = GoalItems(*(t.to(device) for t in (held.images, held.ids, held.mask, held.goal, held.pose)))
    span = span.to(device)
    log.info("goal head: %d training items, %d held out, %d steps", len(train), len(held), steps)
    # The head fits its items or finds the named thing depending on its items and length (docs/policy.md,
    # "From pixels"): it is read on the held-out episodes every `check_every` steps, the best kept.
    best: tuple[dict[str, float], int, dict[str, torch.Tensor]] | None = None  # errors, step, weights
    for step in range(1, steps + 1):
        pick = torch.randint(0, len(train), (batch_size,), generator=generator)
        images = shift_images(train.images[pick], cfg.image_shift, generator)  # no-op at image_shift 0
        guess = head(images.to(device), train.ids[pick].to(device), train.mask[pick].to(device))
        loss = GoalHead.loss(guess, train.goal[pick].to(device))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if len(held) and (step % check_every == 0 or step == steps):
            errors = goal_errors(head, held, span)
            log.info("goal head step %d: loss %.4f, held-out median %.4f", step, loss.item(), errors["goal_median"])
            if best is None or errors["goal_median"] < best[0]["goal_median"]:
                best = (errors, step, {k: v.detach().clone() for k, v in head.state_dict().items()})
    if best is not None:
        head.load_state_dict(best[2])  # its held-out errors are the ones read then
    freeze_goal(model)
    return {**(best[0] if best else {}), "goal_best_step": float(best[1] if best else 0),
            "goal_pretrain_s": time.perf_counter() - started}


def freeze_goal(model: HierarchicalPolicy) -> None:
    """The head (and its embeddings) no longer train: the policy learns from a fixed estimate."""
    if model.goal is not None:
        for p in model.goal.parameters():
            p.requires_grad_(False)
