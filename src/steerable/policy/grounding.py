"""The tables that ground a command's words in the described objects of the state (`HierarchicalPolicy`).

Built once when the model is: which values of the model state are each object's features, and which
token ids name each object. Torch tensors from the object layout (`steerable.policy.objects`).
"""

from __future__ import annotations

import torch

from steerable.policy.config import PolicyConfig
from steerable.policy.objects import ObjectLayout, object_layout

__all__ = ["OBJECT_FEATURES", "grounded_layout", "object_fields", "object_match"]

# Per object: x, y, z, present (normalised state; 0 for a missing axis, 1 for a missing `present`),
# then its offset from the end effector (x, y, z). With `fine_offsets`, the offset again at the object
# description's magnifications (`WorldScales.fine_offsets`) through tanh: the normalised offset spans
# the work surface, so a gripper 2 cm beside a cube and one right above it read nearly the same, and a
# small net stopped short and closed on nothing (docs/policy.md, "What made the low level act").
OBJECT_FEATURES = 7


def grounded_layout(cfg: PolicyConfig) -> ObjectLayout | None:
    """The described objects when the policy grounds them (they and the end effector in its state)."""
    if not (cfg.ground_objects and cfg.state_mode != "none" and cfg.state_dim and cfg.object_tokens):
        return None
    layout = object_layout(cfg)
    return layout if layout is not None and layout.end_effector is not None else None


def object_fields(cfg: PolicyConfig, layout: ObjectLayout, state_in: int) -> torch.Tensor:
    """(O, 7) indices into [model state | 0 | 1] of each object's features (see `OBJECT_FEATURES`)."""
    zero, one = state_in, state_in + 1
    first_offset = cfg.state_dim + cfg.motion_dim
    rows = []
    for o, slot in enumerate(layout.objects):
        x, y, z = slot.axes
        rows.append([x, y, zero if z is None else z, one if slot.present is None else slot.present,
                     *(first_offset + 3 * o + k for k in range(3))])
    return torch.tensor(rows, dtype=torch.long)


def object_match(cfg: PolicyConfig, layout: ObjectLayout, vocab: int) -> torch.Tensor:
    """(vocab, O): 1 where a token id names object o (`cfg.object_tokens`)."""
    slots = layout.objects
    if len(cfg.object_tokens) != len(slots):
        raise ValueError(f"policy.object_tokens lists {len(cfg.object_tokens)} objects; the object description "
                         f"{len(slots)}")
    match = torch.zeros(vocab, len(slots))
    for o, ids in enumerate(cfg.object_tokens):
        for t in ids:
            if 0 <= t < vocab:
                match[t, o] = 1.0
    return match
