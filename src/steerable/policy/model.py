"""`HierarchicalPolicy`: backbone + state encoder + action expert, and the loss dict a batch drives.

The backbone sequence is `[camera tokens | state tokens | chat text]` under the block-causal mask
of `masks`. The text head is scored on the target turns (shift done in `losses`); the action expert
reads the last `expert_layers` backbone layers for samples that carry actions. A high-level sample
(no actions) trains text only, a low-level sample without a target trains actions only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from steerable.policy.backbone import Backbone
from steerable.policy.config import PolicyConfig
from steerable.policy.expert import ActionExpert, sample_time
from steerable.policy.losses import flow_matching_loss, text_loss
from steerable.policy.masks import block_causal_mask, position_ids

__all__ = ["Encoded", "HierarchicalPolicy"]


@dataclass
class Encoded:
    """A backbone pass: last hidden state, every layer's states, which keys are real, prefix length."""

    last: torch.Tensor
    hidden: tuple[torch.Tensor, ...]
    valid: torch.Tensor
    prefix_len: int
    cache: Any = None


class HierarchicalPolicy(nn.Module):
    """Text head and action expert over one vision-language backbone. Inputs are already normalised."""

    def __init__(self, cfg: PolicyConfig, backbone: Backbone) -> None:
        super().__init__()
        if cfg.action_dim < 1:
            raise ValueError("PolicyConfig.action_dim must be set (from the dataset) before building the model")
        self.cfg = cfg
        self.backbone = backbone
        width = backbone.hidden_size
        if cfg.expert_layers > backbone.num_layers:
            raise ValueError(f"expert_layers={cfg.expert_layers} but the backbone has {backbone.num_layers} layers")
        self.state_bins: nn.Embedding | None = None
        self.state_proj: nn.Linear | None = None
        if cfg.state_mode == "bins" and cfg.state_dim:
            self.state_bins = nn.Embedding(cfg.state_bins, width)
            self.state_dim_embed = nn.Parameter(torch.randn(cfg.state_dim, width) * 0.02)
        elif cfg.state_mode == "projector" and cfg.state_dim:
            self.state_proj = nn.Linear(cfg.state_dim, width)
        self.camera_embed = nn.Parameter(torch.zeros(max(len(cfg.cameras), 1), 1, width))
        self.expert = ActionExpert(cfg.action_dim, cfg.chunk_size, width, cfg.expert_hidden, cfg.expert_heads,
                                   cfg.expert_layers)
        if cfg.freeze_vision:
            for p in backbone.inner.vision_model.parameters():
                p.requires_grad_(False)

    # -- encoding -------------------------------------------------------------------------------

    def state_tokens(self, state: torch.Tensor) -> torch.Tensor:
        """(B, S) state in [-1, 1] -> (B, n, hidden) prefix tokens (n = S for bins, 1 for the projector)."""
        if self.state_bins is not None:
            n = self.cfg.state_bins
            bins = ((state.clamp(-1, 1) + 1) / 2 * n).long().clamp(0, n - 1)
            return self.state_bins(bins) + self.state_dim_embed[None]
        if self.state_proj is not None:
            return self.state_proj(state)[:, None]
        return state.new_zeros(state.shape[0], 0, self.backbone.hidden_size)

    def prefix(self, images: torch.Tensor | None, state: torch.Tensor | None) -> torch.Tensor:
        """The prefix embeddings: every camera's tokens (with a per-camera embedding), then the state."""
        parts = []
        if images is not None and images.shape[1]:
            batch, cams = images.shape[:2]
            feats = self.backbone.image_tokens(images.to(self.backbone.text.dtype))
            feats = feats.reshape(batch, cams, -1, feats.shape[-1]) + self.camera_embed[None, :cams]
            parts.append(feats.flatten(1, 2))
        if state is not None:
            parts.append(self.state_tokens(state.to(self.backbone.text.dtype)))
        if not parts:
            raise ValueError("the prefix needs cameras or a state")
        return torch.cat(parts, dim=1)

    def encode(self, images: torch.Tensor | None, state: torch.Tensor | None, input_ids: torch.Tensor,
               attention_mask: torch.Tensor, *, use_cache: bool = False) -> Encoded:
        prefix = self.prefix(images, state)
        embeds = torch.cat([prefix, self.backbone.embed(input_ids).to(prefix.dtype)], dim=1)
        plen = prefix.shape[1]
        mask = block_causal_mask(plen, attention_mask)
        positions = position_ids(plen, attention_mask)
        cache = self.backbone.new_cache() if use_cache else None
        last, hidden, cache = self.backbone.run(embeds, mask, positions, cache=cache, use_cache=use_cache)
        ones = torch.ones(attention_mask.shape[0], plen, dtype=torch.bool, device=attention_mask.device)
        valid = torch.cat([ones, attention_mask.bool()], dim=1)
        return Encoded(last, hidden, valid, plen, cache)

    def contexts(self, enc: Encoded, rows: torch.Tensor | None = None) -> list[torch.Tensor]:
        layers = enc.hidden[-self.cfg.expert_layers:]
        return [h if rows is None else h[rows] for h in layers]

    # -- training -------------------------------------------------------------------------------

    def forward(self, batch: dict[str, Any], generator: torch.Generator | None = None) -> dict[str, torch.Tensor]:
        """The loss dict of a prepared batch: `loss`, `text_loss`, `flow_loss`, `text_tokens`, `action_values`."""
        enc = self.encode(batch.get("images"), batch.get("state"), batch["input_ids"], batch["attention_mask"])
        t_loss, n_text = text_loss(enc.last[:, enc.prefix_len:], batch["labels"], self.backbone.logits)
        f_loss, n_act = enc.last.sum() * 0.0, 0
        if "actions" in batch:
            mask = batch["action_mask"].bool() & batch["predict_actions"].bool()[:, None, None]
            rows = torch.nonzero(mask.flatten(1).any(1), as_tuple=True)[0]
            if rows.numel():
                actions = batch["actions"][rows].to(enc.last.dtype)
                noise = torch.randn(actions.shape, device=actions.device, dtype=actions.dtype, generator=generator)
                t = sample_time(rows.numel(), actions.device, generator).to(actions.dtype)
                noisy = t[:, None, None] * noise + (1 - t[:, None, None]) * actions
                velocity = self.expert(noisy, t, self.contexts(enc, rows), enc.valid[rows])
                f_loss, n_act = flow_matching_loss(velocity, noise - actions, mask[rows])
        loss = self.cfg.text_loss_weight * t_loss + self.cfg.flow_loss_weight * f_loss
        return {
            "loss": loss,
            "text_loss": t_loss.detach(),
            "flow_loss": f_loss.detach(),
            "text_tokens": torch.tensor(n_text),
            "action_values": torch.tensor(n_act),
        }

    # -- actions --------------------------------------------------------------------------------

    @torch.no_grad()
    def sample_actions(self, images: torch.Tensor | None, state: torch.Tensor | None, input_ids: torch.Tensor,
                       attention_mask: torch.Tensor, *, steps: int | None = None, noise: torch.Tensor | None = None,
                       generator: torch.Generator | None = None) -> torch.Tensor:
        """A normalised (B, chunk_size, action_dim) chunk, integrated from noise in `steps` Euler steps."""
        enc = self.encode(images, state, input_ids, attention_mask)
        ctx = self.contexts(enc)
        batch = input_ids.shape[0]
        shape = (batch, self.cfg.chunk_size, self.cfg.action_dim)
        x = noise if noise is not None else torch.randn(shape, generator=generator, device=input_ids.device)
        x = x.to(enc.last.dtype)
        n = steps or self.cfg.flow_steps
        dt = -1.0 / n
        for i in range(n):
            t = torch.full((batch,), 1.0 + i * dt, device=x.device, dtype=x.dtype)
            x = x + dt * self.expert(x, t, ctx, enc.valid)
        return x.float()
