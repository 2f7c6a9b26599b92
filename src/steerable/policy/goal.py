"""The goal head: where the current command ends, read from the cameras and the command's words.

A policy that acts from pixels has to find, in its images, the thing its command names ("the red
cube"), within the centimetre a grasp tolerates. The backbone's image tokens (one per 8x8 patch of
a 32 px image) are too coarse for that, and the action loss alone did not teach it (0.00 from
cameras: docs/policy.md). Demonstrations carry the answer without any object labels: a command's
segment ends where the robot was sent, so the robot's own state at the end of the segment (the
pose dimensions the actions command) is the command's goal (hindsight; `EpisodeSubtasks.end_row`).

The head (convolutions over every camera, a soft arg-max per word of the command and camera)
predicts that goal in the normalised units of the state, and the action
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
from steerable.policy.grounding import grounded_layout

__all__ = ["GoalHead", "OFFSET_GAINS", "checks_from_cameras", "goal_features", "has_goal_head"]

# The offset from the current pose is read again at these magnifications (through tanh): the state is
# normalised over its range, so a gripper a few hundredths of the range beside its goal and one right on
# it read nearly the same at gain 1 (what a small net stopped short on, docs/policy.md).
OFFSET_GAINS = (4.0, 16.0)


def has_goal_head(cfg: PolicyConfig) -> bool:
    """Whether a policy of `cfg` has a goal head: asked for, with cameras, commanded pose dimensions and a
    state, and a state that does not hold the named objects' positions (`grounded_layout`: those it reads
    exactly)."""
    return bool(cfg.goal_head and cfg.cameras and cfg.pose_pairs and cfg.state_mode != "none" and cfg.state_dim
                and grounded_layout(cfg) is None)


def checks_from_cameras(cfg: PolicyConfig) -> bool:
    """Whether the step check reads the goal head's evidence (`GoalHead.read`) instead of an object's place
    in the state, and learns from the frames where each command started (`PolicyDataset`)."""
    return bool(cfg.step_check and cfg.done_head and cfg.check_reads_goal and has_goal_head(cfg))


def goal_features(goal: torch.Tensor, pose: torch.Tensor) -> torch.Tensor:
    """(B, P) goal and current pose (normalised) -> (B, P * (2 + len(OFFSET_GAINS))) features."""
    offset = goal - pose
    return torch.cat([goal, offset, *(torch.tanh(g * offset) for g in OFFSET_GAINS)], dim=-1)


class GoalHead(nn.Module):
    """(B, cameras, 3, H, W) images and a command's (B, T) token ids -> (B, P) normalised goal pose.

    Each word looks for itself in each camera: a word's query (its embedding read in context by one
    self-attention layer) against every pixel's features (three convolutions) gives a soft arg-max, where that
    word is in the image, and the features there. Per word, those give a goal candidate and a weight;
    the goal is the weighted candidates. "red" learns to point at red from every command that says it,
    the way the privileged policy read each word's object position (`objects`), here from pixels.
    The head reads no state and no backbone state: from the backbone's reading of the command, which
    also sees the state, "the goal is about where the gripper is" was the easy answer, and a head
    that read it learnt that (a goal beside the gripper at every command's start, 0.00 as both levels).
    """

    def __init__(self, cfg: PolicyConfig, width: int, vocab: int, channels: int = 32) -> None:
        super().__init__()
        # Its own copy of the token embeddings (`HierarchicalPolicy` starts it as the backbone's): the
        # text loss moves the backbone's, and a head trained first and then frozen must read what it learnt on.
        self.embed = nn.Embedding(vocab, width)
        heads = 4 if width % 4 == 0 else 1
        self.cameras = max(len(cfg.cameras), 1)
        self.pose_dim = len(cfg.pose_pairs)
        self.positions = nn.Parameter(torch.randn(cfg.max_length, width) * 0.02)
        self.reader = nn.TransformerEncoderLayer(width, heads, 2 * width, dropout=0.0, batch_first=True)
        self.coords = cfg.goal_coords
        self.trunk = nn.Sequential(nn.Conv2d(5 if self.coords else 3, channels, 3, padding=1), nn.GELU(),
                                   nn.Conv2d(channels, channels, 3, padding=1), nn.GELU(),
                                   nn.Conv2d(channels, channels, 3, padding=1))
        self.camera_embed = nn.Parameter(torch.zeros(self.cameras, channels, 1, 1))
        self.query = nn.Linear(width, channels)
        self.reads = reads = self.cameras * (2 + channels) + width  # per word: (point, features) per camera, the word
        self.candidate = nn.Sequential(nn.Linear(reads, 4 * channels), nn.GELU(),
                                       nn.Linear(4 * channels, self.pose_dim))
        self.weight = nn.Linear(width, 1)
        self.scale = channels ** -0.5

    @property
    def evidence_width(self) -> int:
        """The width of `read`'s evidence: two summaries of what each word read."""
        return 2 * self.reads

    def forward(self, images: torch.Tensor, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.read(images, ids, mask)[0]

    def read(self, images: torch.Tensor, ids: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The (B, P) goal and the (B, `evidence_width`) evidence it came from: what the words read in each
        camera (where each one is, the features there), weighted as the goal weighs them, and their mean.
        The camera step check (`HierarchicalPolicy.check_out`) reads the evidence: whether the cube a pick
        names is in the gripper shows in where the wrist camera finds it."""
        embeds = self.embed(ids)
        batch, cams, _, height, width = images.shape
        words = self.reader(embeds.float() + self.positions[: embeds.shape[1]], src_key_padding_mask=~mask.bool())
        x = images.float().flatten(0, 1)
        gy, gx = torch.meshgrid(torch.linspace(-1, 1, height, device=x.device),
                                torch.linspace(-1, 1, width, device=x.device), indexing="ij")
        if self.coords:
            x = torch.cat([x, gx.expand(x.shape[0], 1, -1, -1), gy.expand(x.shape[0], 1, -1, -1)], dim=1)
        feats = (self.trunk(x) + self.camera_embed[:cams].repeat(batch, 1, 1, 1)).flatten(2)  # (B*cams, C, HW)
        feats = feats.unflatten(0, (batch, cams))  # (B, cams, C, HW)
        query = self.query(words)  # (B, T, C)
        attend = (torch.einsum("btc,bkcp->btkp", query, feats) * self.scale).softmax(-1)  # (B, T, cams, HW)
        point = torch.stack([attend @ gx.flatten(), attend @ gy.flatten()], dim=-1)  # (B, T, cams, 2)
        under = torch.einsum("btkp,bkcp->btkc", attend, feats)
        per_word = torch.cat([torch.cat([point, under], dim=-1).flatten(2), words], dim=-1)
        weights = self.weight(words).squeeze(-1).masked_fill(~mask.bool(), float("-inf")).softmax(-1)
        real = mask.to(per_word.dtype)[..., None]
        evidence = torch.cat([torch.einsum("bt,btr->br", weights, per_word),
                              (per_word * real).sum(1) / real.sum(1).clamp(min=1.0)], dim=-1)
        return torch.einsum("bt,btp->bp", weights, self.candidate(per_word)), evidence

    @staticmethod
    def loss(estimate: torch.Tensor, goal: torch.Tensor) -> torch.Tensor:
        """Mean squared error (normalised units) against the hindsight goal."""
        return ((estimate.float() - goal.float()) ** 2).mean()
