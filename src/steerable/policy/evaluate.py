"""Held-out evaluation: mean losses, and exact match of generated text against the target turns."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from steerable.policy.generation import GenerationConfig, generate_ids, parse_reply
from steerable.policy.model import HierarchicalPolicy
from steerable.policy.processor import Processor
from steerable.train import collate

__all__ = ["TextCase", "exact_match", "heldout_losses", "text_cases"]


@dataclass
class TextCase:
    """One held-out prompt (the messages before a target turn), its observation and the expected reply."""

    prompt: list[dict[str, Any]]
    expected: str
    observation: dict[str, Any]


def text_cases(items: Iterable[Mapping[str, Any] | None], *, limit: int | None = None) -> list[TextCase]:
    """Cases from PolicyDataset items: the first text target of each high-level sample (tool calls aside)."""
    cases: list[TextCase] = []
    for item in items:
        if item is None or not item["target_message_indices"]:
            continue
        k = min(item["target_message_indices"])
        target = item["messages"][k]
        if item["message_streams"][k] != "high_level" or not isinstance(target.get("content"), str):
            continue
        obs = {"state": item["state"], "images": item.get("images", {})}
        cases.append(TextCase(list(item["messages"][:k]), target["content"].strip(), obs))
        if limit is not None and len(cases) >= limit:
            break
    return cases


@torch.no_grad()
def exact_match(model: HierarchicalPolicy, processor: Processor, cases: Sequence[TextCase], *,
                batch_size: int = 16, device: str | torch.device = "cpu") -> dict[str, float]:
    """Greedy generation on each case: exact-match accuracy, and the majority-answer baseline."""
    if not cases:
        return {"exact_match": float("nan"), "majority_baseline": float("nan"), "cases": 0}
    was_training = model.training
    model.eval()
    hits = 0
    for start in range(0, len(cases), batch_size):
        part = cases[start:start + batch_size]
        ids, mask = processor.prompt([c.prompt for c in part], generation=True, device=device)
        obs = collate([c.observation for c in part])
        assert obs is not None
        inputs = processor.observation(obs, device)
        out = generate_ids(model, inputs.get("images"), inputs.get("state"), ids, mask,
                           GenerationConfig(max_new_tokens=48), processor.eos_id)
        hits += sum(parse_reply(processor.decode(o)).text == c.expected for o, c in zip(out, part, strict=True))
    model.train(was_training)
    majority = Counter(c.expected for c in cases).most_common(1)[0][1]
    return {"exact_match": hits / len(cases), "majority_baseline": majority / len(cases), "cases": len(cases)}


@torch.no_grad()
def heldout_losses(model: HierarchicalPolicy, processor: Processor, batches: Iterable[Mapping[str, Any] | None],
                   device: str | torch.device = "cpu", seed: int = 0) -> dict[str, float]:
    """Mean text, flow and done losses (weighted by target tokens / action values / done labels) over
    held-out batches."""
    was_training = model.training
    model.eval()
    generator = torch.Generator(device=device).manual_seed(seed)  # the same noise every evaluation
    sums = {"text": 0.0, "flow": 0.0, "done": 0.0}
    counts = {"text": 0, "flow": 0, "done": 0}
    for batch in batches:
        if batch is None:
            continue
        out = model(processor.training_batch(batch, device), generator=generator)
        n_text, n_flow = int(out["text_tokens"]), int(out["action_values"])
        sums["text"] += float(out["text_loss"]) * n_text
        sums["flow"] += float(out["flow_loss"]) * n_flow
        counts["text"] += n_text
        counts["flow"] += n_flow
        n_done = int(out.get("done_labels", 0))
        sums["done"] += float(out.get("done_loss", 0.0)) * n_done
        counts["done"] += n_done
        if model.locator is not None:
            sums["locate"] = sums.get("locate", 0.0) + float(out["locate_loss"])
            counts["locate"] = counts.get("locate", 0) + 1
        if model.goal is not None:
            sums["goal"] = sums.get("goal", 0.0) + float(out["goal_loss"])
            counts["goal"] = counts.get("goal", 0) + 1
    model.train(was_training)
    return {f"{k}_loss": sums[k] / counts[k] if counts[k] else float("nan") for k in sums}
