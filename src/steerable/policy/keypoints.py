"""Keypoint tokens: where things are in each camera, as prefix tokens the language can pick from.

The tiny backbone's vision tower turns an 8 x 8 patch into one vector and four patches into one token,
so a 4 cm cube two pixels wide at 32 px is a faint part of one token, and where it sits inside that
token is nearly lost. `--policy.keypoints K` adds, per camera, K tokens that keep position: a small
convolutional net (CoordConv: the pixel coordinates as two more input channels) writes K heat maps,
a soft arg-max of each (over maps at half the image's side, the weights placing the point between
their cells) gives a point (u, v) in [-1, 1], and the token is made of that point (also
read through sines and cosines at four frequencies, so a small move changes the token as much as a
large one), the map's peak and the features under the point. No label trains them: the flow loss
does, through the tokens the text and the action expert read.

They join the prefix after the cameras' own tokens and before the state, so in the block-causal
backbone every text token can read them (the word "red" can find the red thing's point) and the
action expert reads them again through the backbone's outputs. The same idea as the spatial soft
arg-max in visuomotor policies (Levine et al. 2016; LeRobot's diffusion policy), here with tokens a
language model attends to instead of one vector.

Measured (docs/policy.md, "The camera path, one change at a time"): on 200 easy cameras-only simulator
episodes the places learn where commands end (4-5 cm on held-out episodes) but the command's choice
among them does not learn to name the object, and the low level completes no task; off by default.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from steerable.policy.goal import goal_features

__all__ = ["KeypointTokens", "Keypoints"]

_FREQUENCIES = (1.0, 2.0, 4.0, 8.0)


class Keypoints(NamedTuple):
    """What the keypoint net found: the prefix tokens (B, N, hidden), N = cameras x keypoints, and with
    the robot's pose where each point is in the pose's units (B, N, P), else None."""

    tokens: torch.Tensor
    places: torch.Tensor | None


class KeypointTokens(nn.Module):
    """(B, cameras, 3, S, S) images in [-1, 1] -> (B, cameras * keypoints, hidden) prefix tokens."""

    def __init__(self, cameras: int, keypoints: int, channels: int, hidden: int, pose: int = 0) -> None:
        super().__init__()
        self.keypoints = keypoints
        self.pose = pose
        self.net = nn.Sequential(
            nn.Conv2d(5, channels, 3, padding=1), nn.GELU(),
            nn.Conv2d(channels, channels, 3, stride=2, padding=1), nn.GELU(),  # maps at half the side
            nn.Conv2d(channels, channels, 3, padding=1), nn.GELU(),
        )
        self.heat = nn.Conv2d(channels, keypoints, 1)
        inputs = 2 + 4 * len(_FREQUENCIES) + 1 + channels  # point, its waves, peak, features under it
        # With the robot's pose (`pose` commanded dimensions): per camera, where a point is in the pose's
        # units (from the point and the pose, so a wrist camera's points can follow the hand), read as a
        # goal is, with its offset from the pose magnified (`goal.goal_features`).
        self.place = nn.ModuleList(nn.Linear(2 + pose, pose) for _ in range(cameras if pose else 0))
        reads = len(goal_features(torch.zeros(1, pose), torch.zeros(1, pose))[0]) if pose else 0
        inputs += reads
        # The command chooses one place (`choose`): a query from its words against every point's token.
        self.query = nn.Linear(hidden, hidden) if pose else None
        self.key = nn.Linear(hidden, hidden) if pose else None
        self.chosen_in = nn.Sequential(nn.Linear(reads, hidden), nn.GELU(), nn.Linear(hidden, hidden)) if pose else None
        self.out = nn.Sequential(nn.Linear(inputs, hidden), nn.GELU(), nn.Linear(hidden, hidden))
        self.which = nn.Parameter(torch.randn(cameras, keypoints, hidden) * 0.02)  # which camera and point

    def forward(self, images: torch.Tensor, pose: torch.Tensor | None = None) -> Keypoints:
        """The points' tokens and, given the (B, P) normalised pose, their places."""
        batch, cams = images.shape[:2]
        point, peak, under = self.find(images)
        waves = torch.cat([f(math.pi * scale * point) for scale in _FREQUENCIES for f in (torch.sin, torch.cos)], -1)
        parts, places = [point, waves, peak, under], None
        if self.place and pose is not None:
            seen = point.reshape(batch, cams, self.keypoints, 2)
            held = pose.float()[:, None].expand(-1, self.keypoints, -1)
            places = torch.stack([self.place[c](torch.cat([seen[:, c], held], -1)) for c in range(cams)], 1)
            places = places.flatten(1, 2)  # (B, C * K, P)
            around = pose.float().repeat_interleave(cams * self.keypoints, 0)
            parts.append(goal_features(places.reshape(-1, self.pose), around).reshape(batch * cams, self.keypoints, -1))
        tokens = self.out(torch.cat(parts, dim=-1))  # (N, K, hidden)
        tokens = tokens.reshape(batch, cams, self.keypoints, -1) + self.which[None, :cams]
        return Keypoints(tokens.flatten(1, 2), places)

    def choose(self, words: torch.Tensor, mask: torch.Tensor, points: Keypoints, pose: torch.Tensor
               ) -> tuple[torch.Tensor, torch.Tensor]:
        """The command's choice among the places: (B, N) logits from its words' mean (B, T, hidden, read
        by the backbone, `mask` the real ones) against each point's token, and what the action expert
        reads of the chosen place (the places weighted by the softmax, detached, with its offset from
        the pose magnified) as one (B, 1, hidden) token."""
        assert points.places is not None and self.chosen_in is not None
        assert self.query is not None and self.key is not None
        weights = mask.to(words.dtype)[..., None]
        # Detached: the choice learns in its own maps; its loss through the backbone took the backbone from
        # the text (held-out exact match 0.41 against 0.78, docs/policy.md, "The camera path").
        pooled = ((words * weights).sum(1) / weights.sum(1).clamp(min=1.0)).detach()
        logits = (self.key(points.tokens.to(words.dtype)) @ self.query(pooled)[..., None]).squeeze(-1)
        logits = logits.float() / math.sqrt(pooled.shape[-1])
        chosen = (logits.softmax(-1)[..., None] * points.places.float()).sum(1)
        return logits, self.chosen_in(goal_features(chosen.detach(), pose.float()).to(words.dtype))[:, None]

    @staticmethod
    def loss(places: torch.Tensor, logits: torch.Tensor, goal: torch.Tensor) -> torch.Tensor:
        """Where commands end (B, P, normalised) against the nearest of each sample's places (B, N, P):
        every goal pulls the place closest to it, so the places spread over where commands end (objects,
        receptacles) whichever the command names; and the command's choice (B, N logits) learns to name
        that nearest place."""
        error = ((places.float() - goal.float()[:, None]) ** 2).mean(-1)  # (B, N)
        nearest = error.min(dim=1)
        return nearest.values.mean() + F.cross_entropy(logits.float(), nearest.indices.detach())

    def find(self, images: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Per image (N = B * cameras) and keypoint: the point (N, K, 2) as (u, v) in [-1, 1], u to the
        right and v down, the map's peak (N, K, 1) and the features under the point (N, K, channels)."""
        batch, cams, channels, height, width = images.shape
        x = images.reshape(batch * cams, channels, height, width).float()
        gy, gx = torch.meshgrid(torch.linspace(-1, 1, height, device=x.device),
                                torch.linspace(-1, 1, width, device=x.device), indexing="ij")
        x = torch.cat([x, gx.expand(len(x), 1, -1, -1), gy.expand(len(x), 1, -1, -1)], dim=1)
        feats = self.net(x)
        gy, gx = torch.meshgrid(torch.linspace(-1, 1, feats.shape[-2], device=x.device),
                                torch.linspace(-1, 1, feats.shape[-1], device=x.device), indexing="ij")
        logits = self.heat(feats).flatten(2)  # (N, K, hw)
        weights = logits.softmax(-1)
        point = torch.stack([weights @ gx.flatten(), weights @ gy.flatten()], dim=-1)
        peak = torch.logsumexp(logits, -1, keepdim=True) - math.log(logits.shape[-1])  # 0 for a flat map
        under = torch.einsum("nkp,ncp->nkc", weights, feats.flatten(2))
        return point, peak, under
