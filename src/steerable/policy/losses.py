"""The two losses: next-token text cross-entropy on target tokens, and masked flow matching.

`ChatTokenizer` labels are aligned with the ids (label[i] is ids[i] inside a target span), so the
logit at position i is scored against label[i + 1]: the shift happens here, once. The flow loss is
a mean over the real (unpadded) action steps and dimensions of the samples that carry actions.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

__all__ = ["IGNORE_INDEX", "flow_matching_loss", "next_token_targets", "text_loss"]

IGNORE_INDEX = -100


def next_token_targets(labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(rows, positions, token ids): the hidden state at (row, position) is scored on predicting the id.

    `labels` (B, T) are aligned with the input ids, so position i predicts label i + 1.
    """
    shifted = labels[:, 1:]
    rows, cols = torch.nonzero(shifted != IGNORE_INDEX, as_tuple=True)
    return rows, cols, shifted[rows, cols]


def text_loss(hidden: torch.Tensor, labels: torch.Tensor, head: Callable[[torch.Tensor], torch.Tensor]
              ) -> tuple[torch.Tensor, int]:
    """(mean next-token cross-entropy over target tokens, number of target tokens).

    `hidden` (B, T, D) are the text positions' hidden states, `head` maps them to logits. Only the
    scored positions go through the head (a large vocabulary never makes B x T x V logits). With no
    target token the loss is an exact zero that keeps the graph.
    """
    rows, cols, targets = next_token_targets(labels)
    if targets.numel() == 0:
        return hidden.sum() * 0.0, 0
    logits = head(hidden[rows, cols]).float()
    return F.cross_entropy(logits, targets), int(targets.numel())


def flow_matching_loss(predicted: torch.Tensor, target: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, int]:
    """(mean squared error over the True entries of `mask`, number of such entries).

    `predicted`, `target` and `mask` are (B, H, A); `mask` is False on padded steps (past the
    episode's end), padded dimensions, and samples without an action target.
    """
    count = int(mask.sum())
    if count == 0:
        return predicted.sum() * 0.0, 0
    # where, not multiply: whatever sits in a padded entry (even NaN) cannot reach the sum.
    err = torch.where(mask.bool(), (predicted.float() - target.float()).pow(2), 0.0)
    return err.sum() / count, count
