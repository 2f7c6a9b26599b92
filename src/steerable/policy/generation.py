"""Text generation over the multimodal prefix, with or without a KV cache, and tool-call parsing.

With the cache, the prefix and prompt run once and each step feeds one new token that attends to
every real key so far; without it, every step re-runs the whole sequence (O(n^2), kept as the
reference path: both give the same tokens). Prompts are right-padded: a new token's position
counts real tokens only and padding stays masked, so batching never changes a sample's output.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from steerable.policy.masks import decode_mask

__all__ = ["GenerationConfig", "ParsedReply", "generate_ids", "parse_reply", "sample_next"]

_TOOL_CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)
_SAY = re.compile(r"<say>(.*?)</say>", re.DOTALL)


@dataclass
class GenerationConfig:
    """Decoding settings: greedy when `temperature <= 0`, else sampling with a top-p cut."""

    max_new_tokens: int = 64
    temperature: float = 0.0
    top_p: float = 1.0
    stop: tuple[str, ...] = ()
    use_cache: bool = True
    seed: int | None = None


def sample_next(logits: torch.Tensor, temperature: float, top_p: float,
                generator: torch.Generator | None = None) -> torch.Tensor:
    """(B,) next ids from (B, V) logits: argmax, or softmax(logits / T) cut to the top-p mass (the top
    token always kept) and sampled."""
    if temperature <= 0:
        return logits.argmax(dim=-1)
    probs = torch.softmax(logits.float() / temperature, dim=-1)
    if top_p < 1.0:
        sorted_probs, order = probs.sort(dim=-1, descending=True)
        keep = sorted_probs.cumsum(dim=-1) - sorted_probs < top_p
        keep[:, 0] = True
        sorted_probs = sorted_probs * keep
        probs = torch.zeros_like(probs).scatter(-1, order, sorted_probs)
        probs = probs / probs.sum(dim=-1, keepdim=True)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)


@torch.no_grad()
def generate_ids(policy: Any, images: torch.Tensor | None, state: torch.Tensor | None, input_ids: torch.Tensor,
                 attention_mask: torch.Tensor, gen: GenerationConfig, eos_id: int,
                 decode: Any = None, finished: list[bool] | None = None) -> list[list[int]]:
    """New token ids per sample, stopping at `eos_id` (not returned), a stop string, or the budget.

    `decode(ids) -> str` is needed only for stop strings. `finished`, when given, is filled with one
    flag per sample: True where it ended (end token or stop string), False where the budget cut it.
    """
    generator = None
    if gen.seed is not None:
        generator = torch.Generator(device=input_ids.device).manual_seed(gen.seed)
    batch = input_ids.shape[0]
    device = input_ids.device
    out: list[list[int]] = [[] for _ in range(batch)]
    done = [False] * batch
    lengths = attention_mask.long().sum(dim=1)
    enc = policy.encode(images, state, input_ids, attention_mask, use_cache=gen.use_cache)
    plen = enc.prefix_len
    last = enc.last[torch.arange(batch, device=device), plen + lengths - 1]
    valid, cache = enc.valid, enc.cache
    ids, mask = input_ids, attention_mask.bool()
    for _ in range(gen.max_new_tokens):
        nxt = sample_next(policy.backbone.logits(last), gen.temperature, gen.top_p, generator)
        for i, token in enumerate(nxt.tolist()):
            if done[i]:
                continue
            if token == eos_id:
                done[i] = True
                continue
            out[i].append(token)
            if gen.stop and decode is not None and any(s in decode(out[i]) for s in gen.stop):
                done[i] = True
        if all(done):
            break
        new = nxt[:, None]
        alive = torch.tensor([not d for d in done], device=device)[:, None]
        if gen.use_cache:
            valid = torch.cat([valid, alive], dim=1)
            pos = (valid.long().sum(dim=1, keepdim=True) - 1)
            embeds = policy.backbone.embed(new).to(enc.last.dtype)
            last, _, cache = policy.backbone.run(embeds, decode_mask(valid), pos, cache=cache, use_cache=True)
            last = last[:, -1]
        else:
            ids, mask = torch.cat([ids, new], dim=1), torch.cat([mask, alive], dim=1)
            full = policy.encode(images, state, ids, mask)
            last = full.last[:, -1]
    if finished is not None:
        finished[:] = done
    return out


@dataclass
class ParsedReply:
    """Generated text split into its words and its tool calls (validated against the catalog)."""

    text: str
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)
    # The token budget ran out before the reply ended (no end token, no stop string): it is cut.
    truncated: bool = False

    @property
    def say(self) -> list[str]:
        return [str(c["function"]["arguments"].get("text", "")) for c in self.tool_calls
                if c["function"]["name"] == "say"]


def parse_reply(text: str, tools: Sequence[Mapping[str, Any]] = ()) -> ParsedReply:
    """Pull `<tool_call>{json}</tool_call>` and `<say>...</say>` out of `text`.

    A call whose name is not in `tools` (the catalog; `say` is always known), whose JSON does not
    parse, or whose required arguments are missing, is rejected with a reason, never returned.
    """
    catalog: dict[str, Mapping[str, Any]] = {"say": {"required": ["text"]}}
    for tool in tools:
        function = tool.get("function") or {}
        if isinstance(function.get("name"), str):
            catalog[function["name"]] = function.get("parameters") or {}
    calls: list[dict[str, Any]] = []
    rejected: list[str] = []
    for raw in _TOOL_CALL.findall(text):
        try:
            data = json.loads(raw)
        except ValueError:
            rejected.append(f"not JSON: {raw[:60]!r}")
            continue
        name = data.get("name") if isinstance(data, dict) else None
        args = data.get("arguments") if isinstance(data, dict) else None
        if name not in catalog:
            rejected.append(f"unknown tool {name!r}")
            continue
        if not isinstance(args, dict) or any(k not in args for k in catalog[name].get("required", ())):
            rejected.append(f"{name}: arguments {args!r} miss a required field")
            continue
        calls.append({"type": "function", "function": {"name": name, "arguments": args}})
    calls += [{"type": "function", "function": {"name": "say", "arguments": {"text": s.strip()}}}
              for s in _SAY.findall(text)]
    words = _SAY.sub("", _TOOL_CALL.sub("", text)).strip()
    return ParsedReply(words, calls, rejected)
