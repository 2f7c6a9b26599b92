"""Attention masks and position ids for the backbone sequence `[prefix | text]`.

The prefix (camera tokens and state tokens) is bidirectional within itself and never sees text:
if it did, every text token would read later text through it. Text is causal: token i sees the
whole prefix and text tokens 0..i, never a later one and never padding. The action expert is a
separate stack that reads the backbone's hidden states, so nothing in the backbone attends to
actions. Masks are boolean (True = may attend), shaped (B, 1, Q, K) for the transformers models.
"""

from __future__ import annotations

import torch

__all__ = ["block_causal_mask", "decode_mask", "position_ids"]


def block_causal_mask(prefix_len: int, text_mask: torch.Tensor) -> torch.Tensor:
    """(B, 1, P+T, P+T) mask for `prefix_len` prefix tokens followed by text with `text_mask` (B, T).

    Padding positions attend to themselves only, so no row is empty (an empty row gives NaN in
    scaled-dot-product attention); nothing attends to them.
    """
    batch, text_len = text_mask.shape
    total = prefix_len + text_len
    device = text_mask.device
    valid = torch.cat([torch.ones(batch, prefix_len, dtype=torch.bool, device=device), text_mask.bool()], dim=1)
    idx = torch.arange(total, device=device)
    is_text = idx >= prefix_len
    # key k visible from query q: both prefix, or q is text and k <= q.
    structural = (~is_text[:, None] & ~is_text[None, :]) | (is_text[:, None] & (idx[None, :] <= idx[:, None]))
    mask = structural[None] & valid[:, None, :] & valid[:, :, None]
    mask |= torch.eye(total, dtype=torch.bool, device=device)[None]
    return mask[:, None]


def position_ids(prefix_len: int, text_mask: torch.Tensor) -> torch.Tensor:
    """(B, P+T) positions: 0..P-1 for the prefix, then counting only real text tokens."""
    batch = text_mask.shape[0]
    device = text_mask.device
    prefix = torch.arange(prefix_len, device=device).expand(batch, prefix_len)
    text = prefix_len + (text_mask.long().cumsum(dim=1) - 1).clamp(min=0)
    return torch.cat([prefix, text], dim=1)


def decode_mask(valid: torch.Tensor) -> torch.Tensor:
    """(B, 1, 1, K) mask for one new token that sees every valid key so far (`valid` is (B, K) bool)."""
    return valid.bool()[:, None, None, :]
