"""The flow-matching action expert: a small transformer over an action chunk that reads the backbone.

Each expert layer self-attends over the chunk's steps and cross-attends to the hidden states of
one backbone layer (the last `expert_layers` layers, in order), masked to real prefix and prompt
tokens. The backbone never sees the expert, so actions attend to the prefix and not the other way.
Flow convention (as pi0): x_t = t * noise + (1 - t) * actions, velocity target noise - actions;
sampling integrates from t = 1 (noise) to t = 0 in `steps` Euler steps.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn

__all__ = ["ActionExpert", "sample_time"]


def _time_embedding(t: torch.Tensor, dim: int) -> torch.Tensor:
    half = dim // 2
    freqs = torch.exp(-math.log(10000.0) * torch.arange(half, device=t.device, dtype=torch.float32) / half)
    angles = t.float()[:, None] * 1000.0 * freqs[None]
    emb = torch.cat([angles.sin(), angles.cos()], dim=-1)
    return emb if dim % 2 == 0 else torch.cat([emb, torch.zeros_like(emb[:, :1])], dim=-1)


def sample_time(batch: int, device: torch.device, generator: torch.Generator | None = None) -> torch.Tensor:
    """Flow times in (0.001, 1], weighted toward the noisy end (Beta(1.5, 1), as pi0)."""
    u = torch.rand(batch, device=device, generator=generator)
    return (u ** (1 / 1.5)) * 0.999 + 0.001


class _Block(nn.Module):
    def __init__(self, hidden: int, heads: int, context: int) -> None:
        super().__init__()
        self.norm1, self.norm2, self.norm3 = nn.LayerNorm(hidden), nn.LayerNorm(hidden), nn.LayerNorm(hidden)
        self.self_attn = nn.MultiheadAttention(hidden, heads, batch_first=True)
        self.context = nn.Sequential(nn.LayerNorm(context), nn.Linear(context, hidden))
        self.cross_attn = nn.MultiheadAttention(hidden, heads, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(hidden, hidden * 4), nn.GELU(), nn.Linear(hidden * 4, hidden))

    def forward(self, x: torch.Tensor, ctx: torch.Tensor, ignore: torch.Tensor) -> torch.Tensor:
        h = self.norm1(x)
        x = x + self.self_attn(h, h, h, need_weights=False)[0]
        kv = self.context(ctx)
        x = x + self.cross_attn(self.norm2(x), kv, kv, key_padding_mask=ignore, need_weights=False)[0]
        return x + self.mlp(self.norm3(x))


class ActionExpert(nn.Module):
    """Predicts the flow velocity of a (B, H, A) action chunk from backbone hidden states."""

    def __init__(self, action_dim: int, chunk_size: int, context_dim: int, hidden: int, heads: int,
                 layers: int) -> None:
        super().__init__()
        self.hidden = hidden
        self.action_in = nn.Linear(action_dim, hidden)
        self.step_pos = nn.Parameter(torch.randn(chunk_size, hidden) * 0.02)
        self.time_mlp = nn.Sequential(nn.Linear(hidden, hidden), nn.SiLU(), nn.Linear(hidden, hidden))
        self.blocks = nn.ModuleList(_Block(hidden, heads, context_dim) for _ in range(layers))
        self.norm = nn.LayerNorm(hidden)
        self.action_out = nn.Linear(hidden, action_dim)

    def forward(self, noisy: torch.Tensor, t: torch.Tensor, contexts: Sequence[torch.Tensor],
                context_mask: torch.Tensor) -> torch.Tensor:
        """`contexts`: one (B, K, D) hidden-state tensor per block; `context_mask` (B, K) True = real token."""
        x = self.action_in(noisy) + self.step_pos[None, : noisy.shape[1]]
        x = x + self.time_mlp(_time_embedding(t, self.hidden).to(x.dtype))[:, None]
        ignore = ~context_mask.bool()
        for block, ctx in zip(self.blocks, contexts, strict=True):
            x = block(x, ctx.to(x.dtype), ignore)
        return self.action_out(self.norm(x))
