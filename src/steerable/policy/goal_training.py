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
from typing import Any

import numpy as np
import torch

from steerable.dataset import LeRobotDataset
from steerable.policy.averaging import WeightAverage
from steerable.policy.data import PolicyDataset, action_components
from steerable.policy.goal import GoalHead
from steerable.policy.model import HierarchicalPolicy
from steerable.policy.processor import Processor, shift_images
from steerable.policy.settings import GOAL_PHASE_STEPS, TrainConfig
from steerable.recipes import Recipe
from steerable.train import collate

__all__ = ["GoalItems", "freeze_goal", "goal_errors", "goal_items", "goal_phase_of", "pretrain_goal"]

log = logging.getLogger(__name__)

# The phase's gradient norm bound: at its constant 3e-3 one large step can throw the attention off what it found.
GRAD_CLIP = 1.0
# Whether the head finds the named thing or stays at its plateau (and later memorises its items) is settled in
# its first 500 steps by its starting weights: on the 200 easy episodes the same items gave 1.7 cm or 6.7 cm held
# out at step 500 from two starts (docs/policy.md, "From pixels"). A head whose held-out error after
# RESTART_AFTER steps is still above RESTART_SHARE of chance's (always answering the training goals' mean) starts
# again from new weights, at most MAX_RESTARTS times, within the same steps.
RESTART_AFTER = 500
RESTART_SHARE = 0.25
MAX_RESTARTS = 3
# The phase reads and keeps a moving average of the head's weights, not its last iterate: at the phase's constant
# learning rate the iterate's held-out error wandered between 1.4 and 2.0 cm from one check to the next, the
# average's stayed at 1.1 (stop 54, docs/policy.md "From pixels").
AVERAGE_DECAY = 0.995

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
    """`count` random items of `data` (a low-level component's) whose goal is known, decoded once: its
    frames and the done head's copies (a command just finished), drawn as before the step check from the
    cameras, not that check's counter-examples (a command's first frames again). None known: no item."""
    rng = np.random.default_rng(seed)
    population = len(data) - len(data.check_items)
    pick = rng.choice(population, size=min(count, population), replace=False)
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
    if not parts["goal"]:
        return GoalItems(*(torch.zeros(0) for _ in range(5)))
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
                  lr: float = 1e-3, seed: int = 0, check_every: int = 500, seconds: float | None = None
                  ) -> dict[str, float]:
    """Train `model.goal` alone for `steps` (its training images shifted as `--policy.image_shift` says; at most
    `seconds` of wall time, decoding included), keep the weights that did best on the held-out episodes, freeze
    it, and return their held-out errors (state units) and the step they came from."""
    head = model.goal
    if head is None:
        return {}
    cfg = model.cfg
    pose = [s for _, s in cfg.pose_pairs]
    components = action_components(recipe)
    if not components:
        log.warning("the recipe trains no command's actions alone: the goal head has no phase of its own")
        return {}
    component = components[0]
    train_eps, eval_eps = episodes
    started = time.perf_counter()
    sets = [goal_items(PolicyDataset(dataset, recipe, cfg, processor.image_size, eps, component=component),
                       processor, pose, n, seed, cfg.max_length)
            for eps, n in ((train_eps, items), (eval_eps, max(items // 10, 1)))]
    train, held = sets
    if not len(train):
        log.warning("no command of the training episodes has a known goal (no subtask rows to learn where a "
                    "command ends): the goal head has no phase of its own")
        return {}
    span = torch.tensor(np.array(processor.normalizer.state_max) - np.array(processor.normalizer.state_min),
                        dtype=torch.float32)[pose][:2] / 2  # normalised units -> state units
    device = next(head.parameters()).device
    generator = torch.Generator().manual_seed(seed)
    optimizer = _optimizer(head, lr)
    chance = float(((train.goal.mean(0) - held.goal)[:, :2] * span).norm(dim=-1).median()) if len(held) else 0.0
    held = GoalItems(*(t.to(device) for t in (held.images, held.ids, held.mask, held.goal, held.pose)))
    span = span.to(device)
    log.info("goal head: %d training items, %d held out, %d steps", len(train), len(held), steps)
    # The head fits its items or finds the named thing depending on its items and length (docs/policy.md,
    # "From pixels"): it is read on the held-out episodes every `check_every` steps, the best kept, and
    # started again when it has not found the thing by RESTART_AFTER steps.
    best: tuple[dict[str, float], int, dict[str, torch.Tensor]] | None = None  # errors, step, weights
    began, restarts, attempt_best = 0, 0, float("inf")
    average = WeightAverage(head, AVERAGE_DECAY)
    for step in range(1, steps + 1):
        pick = torch.randint(0, len(train), (batch_size,), generator=generator)
        images = shift_images(train.images[pick], cfg.image_shift, generator)  # no-op at image_shift 0
        guess = head(images.to(device), train.ids[pick].to(device), train.mask[pick].to(device))
        loss = GoalHead.loss(guess, train.goal[pick].to(device))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(head.parameters(), GRAD_CLIP)
        optimizer.step()
        average.update(step - began)
        out_of_time = seconds is not None and time.perf_counter() - started > seconds
        if len(held) and (step % check_every == 0 or step == steps or out_of_time):
            with average.applied():  # the average is what is read and kept
                errors = goal_errors(head, held, span)
                if best is None or errors["goal_median"] < best[0]["goal_median"]:
                    best = (errors, step, {k: v.detach().clone() for k, v in head.state_dict().items()})
            log.info("goal head step %d: loss %.4f, held-out median %.4f", step, loss.item(), errors["goal_median"])
            attempt_best = min(attempt_best, errors["goal_median"])
            if (step - began >= RESTART_AFTER and attempt_best > RESTART_SHARE * chance and restarts < MAX_RESTARTS
                    and steps - step >= RESTART_AFTER):
                restarts += 1
                log.info("goal head step %d: held-out median %.4f is over %.2f of chance's %.4f: new weights",
                         step, attempt_best, RESTART_SHARE, chance)
                _new_weights(model, seed + restarts)
                optimizer = _optimizer(head, lr)
                average = WeightAverage(head, AVERAGE_DECAY)
                began, attempt_best = step, float("inf")
        if out_of_time:
            log.info("goal head: its %.0f s are spent at step %d", seconds, step)
            break
    if best is not None:
        head.load_state_dict(best[2])  # its held-out errors are the ones read then
    freeze_goal(model)
    return {**(best[0] if best else {}), "goal_best_step": float(best[1] if best else 0),
            "goal_restarts": float(restarts), "goal_chance": chance, "goal_pretrain_s": time.perf_counter() - started}


def goal_phase_of(cfg: TrainConfig, model: HierarchicalPolicy, processor: Processor, dataset: LeRobotDataset,
                  recipe: Recipe, built: Any) -> dict[str, float] | None:
    """The goal head's own phase of a training run (`--goal_pretrain_steps`, by default GOAL_PHASE_STEPS or
    `--steps` when fewer; under `--time_budget` at most a quarter of it) on a fresh run: its held-out errors;
    a resumed run that had one keeps the head frozen. None: no such phase."""
    steps = min(GOAL_PHASE_STEPS, cfg.steps) if cfg.goal_pretrain_steps is None else cfg.goal_pretrain_steps
    if model.goal is None or not (steps or built.state.get("goal_pretrained")):
        return None
    if built.checkpoint is not None:
        if built.state.get("goal_pretrained"):
            freeze_goal(model)
            return {}
        return None  # a run started without the phase does not gain one half way
    return pretrain_goal(model, processor, dataset, recipe, (built.train_episodes, built.eval_episodes), steps,
                         items=cfg.goal_pretrain_items, lr=cfg.goal_pretrain_lr, seed=cfg.seed,
                         seconds=None if cfg.time_budget is None else cfg.time_budget / 4)


def _optimizer(head: GoalHead, lr: float) -> torch.optim.Optimizer:
    """AdamW at a constant `lr` (a 200-step warm-up did not help the starts that stayed at the plateau)."""
    return torch.optim.AdamW(head.parameters(), lr=lr, weight_decay=0.01)


def _new_weights(model: HierarchicalPolicy, seed: int) -> None:
    """The goal head's weights as a fresh head's from `seed` (its embeddings again the backbone's)."""
    assert model.goal is not None
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        fresh = GoalHead(model.cfg, model.backbone.hidden_size, model.backbone.vocab_size)
    ids = torch.arange(model.backbone.vocab_size, device=model.goal.embed.weight.device)
    with torch.no_grad():
        fresh.embed.weight.copy_(model.backbone.embed(ids).to(fresh.embed.weight.device))
    model.goal.load_state_dict(fresh.state_dict())


def freeze_goal(model: HierarchicalPolicy) -> None:
    """The head (and its embeddings) no longer train: the policy learns from a fixed estimate."""
    if model.goal is not None:
        for p in model.goal.parameters():
            p.requires_grad_(False)
