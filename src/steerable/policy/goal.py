"""The goal head: where the current command ends, read from the cameras and the command's words.

A policy that acts from pixels has to find, in its images, the thing its command names ("the red
cube"), within the centimetre a grasp tolerates. The backbone's image tokens (one per 8x8 patch of
a 32 px image) are too coarse for that, and the action loss alone did not teach it (0.00 from
cameras: docs/policy.md). Demonstrations carry the answer without any object labels: a command's
segment ends where the robot was sent, so the robot's own state at the end of the segment (the
pose dimensions the actions command) is the command's goal (hindsight; `EpisodeSubtasks.end_row`).

The head (CoordConv over every camera, FiLM-modulated by the command, a few soft arg-max
keypoints per camera) predicts that goal in the normalised units of the state, and the action
expert reads the prediction and its offset from the current pose, at fine magnifications, as one
more context token: the same input that made the privileged-state policy act (an object's offset
from the gripper), estimated from pixels and words instead of read. The prediction is detached
there: the head learns from its own loss (`loss`), the expert from what the estimate lets it do.

Nothing here knows a world: the cameras, the commanded pose dimensions (`PolicyConfig.pose_pairs`:
action dimensions named like a state dimension, the gripper's excepted) and the language rows of
the dataset are all it reads.
"""

from __future__ import annotations

import torch
from torch import nn

from steerable.policy.config import PolicyConfig

__all__ = ["GoalHead", "OFFSET_GAINS", "goal_features"]

# The offset from the current pose is read again at these magnifications (through tanh): the state is
# normalised over its range, so a gripper a few hundredths of the range beside its goal and one right on
# it read nearly the same at gain 1 (what a small net stopped short on, docs/policy.md).
OFFSET_GAINS = (4.0, 16.0)


def goal_features(goal: torch.Tensor, pose: torch.Tensor) -> torch.Tensor:
    """(B, P) goal and current pose (normalised) -> (B, P * (2 + len(OFFSET_GAINS))) features."""
    offset = goal - pose
    return torch.cat([goal, offset, *(torch.tanh(g * offset) for g in OFFSET_GAINS)], dim=-1)


class GoalHead(nn.Module):
    """(B, cameras, 3, H, W) images and a (B, width) command summary -> (B, P) normalised goal pose.

    The command is read from its words alone (`command`: the token embeddings, their positions, one
    self-attention layer), not from the backbone's reading of it, which also sees the state: from
    that, "the goal is about where the gripper is" was the easy answer, and the head learnt it (a goal
    beside the gripper at every command's start, 0.00 as both levels)."""

    def __init__(self, cfg: PolicyConfig, width: int, channels: int = 32, keypoints: int = 8) -> None:
        super().__init__()
        heads = 4 if width % 4 == 0 else 1
        self.positions = nn.Parameter(torch.randn(cfg.max_length, width) * 0.02)
        self.reader = nn.TransformerEncoderLayer(width, heads, 2 * width, dropout=0.0, batch_first=True)
        self.cameras = max(len(cfg.cameras), 1)
        self.pose_dim = len(cfg.pose_pairs)
        self.trunk = nn.Sequential(nn.Conv2d(5, channels, 3, padding=1), nn.GELU(),
                                   nn.Conv2d(channels, channels, 3, padding=1), nn.GELU())
        self.film = nn.Linear(width, 2 * channels)
        nn.init.zeros_(self.film.weight)
        nn.init.zeros_(self.film.bias)
        self.mid = nn.Sequential(nn.Conv2d(channels, channels, 3, padding=1), nn.GELU())
        self.keys = nn.Conv2d(channels, keypoints, 1)
        self.camera_embed = nn.Parameter(torch.zeros(self.cameras, channels, 1, 1))
        reads = self.cameras * keypoints * (2 + channels) + width
        self.out = nn.Sequential(nn.Linear(reads, 4 * channels), nn.GELU(), nn.Linear(4 * channels, self.pose_dim))

    def command(self, embeds: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """(B, T, width) token embeddings of the command and its (B, T) mask -> (B, width)."""
        x = embeds.float() + self.positions[: embeds.shape[1]]
        x = self.reader(x, src_key_padding_mask=~mask.bool())
        words = mask.float()[..., None]
        return (x * words).sum(1) / words.sum(1).clamp(min=1.0)

    def forward(self, images: torch.Tensor, command: torch.Tensor) -> torch.Tensor:
        batch, cams, _, height, width = images.shape
        x = images.float().flatten(0, 1)
        gy, gx = torch.meshgrid(torch.linspace(-1, 1, height, device=x.device),
                                torch.linspace(-1, 1, width, device=x.device), indexing="ij")
        x = torch.cat([x, gx.expand(x.shape[0], 1, -1, -1), gy.expand(x.shape[0], 1, -1, -1)], dim=1)
        feats = self.trunk(x) + self.camera_embed[:cams].repeat(batch, 1, 1, 1)
        scale, shift = self.film(command.float()).repeat_interleave(cams, 0).chunk(2, dim=-1)
        feats = self.mid(feats * (1 + scale[..., None, None]) + shift[..., None, None])
        weights = self.keys(feats).flatten(2).softmax(-1)  # (B*cams, K, HW)
        flat = feats.flatten(2)
        point = torch.stack([weights @ gx.flatten(), weights @ gy.flatten()], dim=-1)  # (B*cams, K, 2)
        under = torch.einsum("bkp,bcp->bkc", weights, flat)
        read = torch.cat([point, under], dim=-1).reshape(batch, -1)
        return self.out(torch.cat([read, command.float()], dim=-1))

    @staticmethod
    def loss(estimate: torch.Tensor, goal: torch.Tensor) -> torch.Tensor:
        """Mean squared error (normalised units) against the hindsight goal."""
        return ((estimate.float() - goal.float()) ** 2).mean()
