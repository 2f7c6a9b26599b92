"""Between the world and the model: normalisation, camera frames, chat prompts, training batches.

The same object prepares a training batch and a live observation, so training and inference use
one tokenizer, one chat template, one state encoding and one image order. Normalisation: state
min/max to [-1, 1] (what the 256-bin discretisation expects), actions by mean/std.

The model's state vector is the normalised state, then (config permitting) the last commanded
motion of the pose dimensions and every described object's offset from the end effector, each by its
own standard deviation (`model_state`). With `action_mode` relative, the pose dimensions of an
action chunk are offsets from the state the chunk starts from (`model_actions` / `robot_actions`),
so "go to the cube" reads the same wherever the gripper is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from steerable.policy.config import PolicyConfig
from steerable.policy.objects import object_layout
from steerable.train.tokenize import ChatTokenizer

__all__ = ["Normalizer", "Processor", "prepare_images", "shift_images", "text_only"]


@dataclass
class Normalizer:
    """Per-dimension statistics of the state (min, max), the action as the model predicts it (mean,
    std: offsets for relative dimensions), the last motion (mean, std) and the objects' offsets from
    the end effector (std per axis; the last three empty where unused)."""

    state_min: list[float]
    state_max: list[float]
    action_mean: list[float]
    action_std: list[float]
    motion_mean: list[float] = field(default_factory=list)
    motion_std: list[float] = field(default_factory=list)
    offset_std: list[float] = field(default_factory=list)

    @classmethod
    def fit(cls, states: np.ndarray, actions: np.ndarray, motions: np.ndarray | None = None,
            offsets: np.ndarray | None = None) -> Normalizer:
        """From (N, S) states, (N, A) actions in the model's representation, (N, M) motions and
        (N, O, 3) object offsets."""
        out = cls(states.min(0).tolist(), states.max(0).tolist(), actions.mean(0).tolist(), actions.std(0).tolist())
        if motions is not None and motions.size:
            out.motion_mean, out.motion_std = motions.mean(0).tolist(), motions.std(0).tolist()
        if offsets is not None and offsets.size:
            out.offset_std = offsets.reshape(-1, 3).std(0).tolist()
        return out

    def to_dict(self) -> dict[str, list[float]]:
        return dict(vars(self))

    def state(self, x: torch.Tensor) -> torch.Tensor:
        lo, hi = (torch.tensor(v, dtype=torch.float32, device=x.device) for v in (self.state_min, self.state_max))
        return (2 * (x.float() - lo) / (hi - lo).clamp(min=1e-6) - 1).clamp(-1.5, 1.5)

    def action(self, x: torch.Tensor) -> torch.Tensor:
        mean, std = (torch.tensor(v, dtype=torch.float32, device=x.device) for v in (self.action_mean, self.action_std))
        return (x.float() - mean) / std.clamp(min=1e-6)

    def unaction(self, x: torch.Tensor) -> torch.Tensor:
        mean, std = (torch.tensor(v, dtype=torch.float32, device=x.device) for v in (self.action_mean, self.action_std))
        return x.float() * std.clamp(min=1e-6) + mean

    def motion(self, x: torch.Tensor) -> torch.Tensor:
        mean, std = (torch.tensor(v, dtype=torch.float32, device=x.device) for v in (self.motion_mean, self.motion_std))
        return (x.float() - mean) / std.clamp(min=1e-6)

    def offsets(self, x: torch.Tensor) -> torch.Tensor:
        """(..., O, 3) offsets in state units -> divided by the per-axis std."""
        std = torch.tensor(self.offset_std, dtype=torch.float32, device=x.device)
        return x.float() / std.clamp(min=1e-6)


def object_offsets(cfg: PolicyConfig, state: torch.Tensor) -> torch.Tensor | None:
    """(B, O, 3): each described object's position minus the end effector's, per axis (0 where the
    object has no such axis), from raw (B, S) states; None when the config grounds no objects."""
    layout = object_layout(cfg) if cfg.ground_objects else None
    if layout is None or layout.end_effector is None:
        return None
    ee, slots = layout.end_effector, layout.objects
    cols = []
    for slot in slots:
        for axis, at in zip(ee, slot.axes, strict=True):
            cols.append(state[:, at] - state[:, axis] if at is not None else torch.zeros_like(state[:, 0]))
    return torch.stack(cols, dim=1).reshape(state.shape[0], len(slots), 3)


def model_state_dim(cfg: PolicyConfig) -> int:
    """Width of the state vector the model reads: state, motion, object offsets."""
    layout = object_layout(cfg)
    grounds = cfg.ground_objects and layout is not None and layout.end_effector is not None
    offsets = 3 * len(layout.objects) if grounds and layout is not None else 0
    return cfg.state_dim + cfg.motion_dim + offsets


def prepare_images(frames: Sequence[torch.Tensor], size: int) -> torch.Tensor:
    """Per camera a (B, H, W, 3) uint8 tensor -> (B, cameras, 3, size, size) floats in [-1, 1]."""
    out = []
    for frame in frames:
        x = frame.permute(0, 3, 1, 2).float() / 255.0
        if x.shape[-2:] != (size, size):
            x = F.interpolate(x, size=(size, size), mode="bilinear", align_corners=False, antialias=True)
        out.append(x * 2 - 1)
    return torch.stack(out, dim=1)


def shift_images(images: torch.Tensor, pixels: int, generator: torch.Generator | None = None) -> torch.Tensor:
    """(B, cameras, 3, S, S) images, each moved by a random whole number of pixels in [-pixels, pixels]
    along each axis, the edge pixels repeated into what the move uncovers (random-shift augmentation)."""
    if pixels <= 0:
        return images
    batch, cams, channels, side, _ = images.shape
    flat = F.pad(images.reshape(batch * cams, channels, side, side), (pixels,) * 4, mode="replicate")
    dx, dy = (torch.randint(0, 2 * pixels + 1, (2, batch * cams), generator=generator)).tolist()
    crops = [flat[i, :, y : y + side, x : x + side] for i, (x, y) in enumerate(zip(dx, dy, strict=True))]
    return torch.stack(crops).reshape(images.shape)


def text_only(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Messages with image blocks removed (cameras go to the prefix, not the text)."""
    result = []
    for m in messages:
        content = m.get("content")
        if isinstance(content, list):
            content = "".join(str(b.get("text") or "") for b in content if isinstance(b, Mapping)
                              and b.get("type") == "text")
        result.append({**m, "content": content})
    return result


class Processor:
    """Turns collated `PolicyDataset` batches and live observations into model inputs."""

    def __init__(self, cfg: PolicyConfig, tokenizer: Any, normalizer: Normalizer, image_size: int,
                 tools: Sequence[Mapping[str, Any]] | None = None) -> None:
        self.cfg = cfg
        self.tokenizer = tokenizer
        self.normalizer = normalizer
        self.image_size = image_size
        self.tools = list(tools or [])
        self.chat = ChatTokenizer(tokenizer, tools=self.tools or None, max_length=cfg.max_length)

    @property
    def eos_id(self) -> int:
        return int(self.tokenizer.eos_token_id)

    def training_batch(self, batch: Mapping[str, Any], device: torch.device | str = "cpu", *,
                       augment: bool = False) -> dict[str, Any]:
        """Model inputs of a collated batch: images, state, tokens and labels, normalised action chunks;
        `augment`: the images shifted as `PolicyConfig.image_shift` says (training steps only)."""
        messages = [text_only(m) for m in batch["messages"]]
        tok = self.chat({"messages": messages, "message_streams": batch["message_streams"],
                         "target_message_indices": batch["target_message_indices"]})
        assert tok is not None
        out: dict[str, Any] = {k: tok[k].to(device)
                               for k in ("input_ids", "attention_mask", "labels", "predict_actions")}
        out.update(self.observation(batch, device))
        if augment and "images" in out:
            out["images"] = shift_images(out["images"], self.cfg.image_shift)
        if "actions" in batch:
            state = None
            if self.cfg.relative_pairs:
                state = torch.as_tensor(batch["state"]) if "state" in batch else self.state_from(batch)
            out["actions"] = self.model_actions(torch.as_tensor(batch["actions"]), state).to(device)
            out["action_mask"] = batch["action_mask"].to(device)
        if "goal" in batch:  # a raw state, NaN where unknown; normalised as the state is
            out["goal"] = self.normalizer.state(torch.as_tensor(batch["goal"])).to(device)
        for key in ("done", "check", "relation"):
            if key in batch:
                out[key] = torch.as_tensor(batch[key]).to(device)
        return out

    def model_actions(self, actions: torch.Tensor, state: torch.Tensor | None) -> torch.Tensor:
        """(B, H, A) robot actions -> what the expert predicts: relative dimensions minus the (B, S) raw
        state the chunk starts from, then normalised."""
        x = actions.float().clone()
        if state is not None:
            for a, s in self.cfg.relative_pairs:
                x[..., a] -= state.float().reshape(x.shape[0], -1).to(x.device)[:, None, s]
        return self.normalizer.action(x)

    def robot_actions(self, chunk: torch.Tensor, state: torch.Tensor | None) -> torch.Tensor:
        """The inverse of `model_actions`: a normalised (B, H, A) chunk -> robot units."""
        x = self.normalizer.unaction(chunk)
        if state is not None:
            for a, s in self.cfg.relative_pairs:
                x[..., a] += state.float().reshape(x.shape[0], -1).to(x.device)[:, None, s]
        return x

    def observation(self, obs: Mapping[str, Any], device: torch.device | str = "cpu") -> dict[str, Any]:
        """`images` (B, C, 3, S, S) and normalised `state` from a batch or an observation dict (its
        `state`, else its `cfg.state_keys` features concatenated)."""
        out: dict[str, Any] = {}
        if self.cfg.cameras:
            frames = [torch.as_tensor(obs["images"][cam] if "images" in obs else obs[cam]) for cam in self.cfg.cameras]
            frames = [f[None] if f.ndim == 3 else f for f in frames]
            out["images"] = prepare_images(frames, self.image_size).to(device)
        if self.cfg.state_mode != "none" and self.cfg.state_dim:
            state = torch.as_tensor(obs["state"]) if "state" in obs else self.state_from(obs)
            motion = obs.get("motion")
            out["state"] = self.model_state(state, None if motion is None else torch.as_tensor(motion)).to(device)
        return out

    def model_state(self, state: torch.Tensor, motion: torch.Tensor | None = None) -> torch.Tensor:
        """(B, model_state_dim) from a raw (S,) or (B, S) state and the last motion ((M,) or (B, M);
        None: at rest): the normalised state, motion and object offsets (see the module docstring)."""
        state = state[None] if state.ndim == 1 else state
        parts = [self.normalizer.state(state)]
        if self.cfg.motion_dim:
            if motion is None:
                motion = torch.zeros(state.shape[0], self.cfg.motion_dim)
            motion = motion[None] if motion.ndim == 1 else motion
            parts.append(self.normalizer.motion(motion.to(state.device).expand(state.shape[0], -1)))
        offsets = object_offsets(self.cfg, state.float())
        if offsets is not None:
            parts.append(self.normalizer.offsets(offsets).flatten(1))
        return torch.cat(parts, dim=1)

    def state_from(self, features: Mapping[str, Any]) -> torch.Tensor:
        """The state vector from a mapping holding each of `cfg.state_keys`, concatenated in that order
        along the last dimension ((S,) or (B, S))."""
        parts = [torch.as_tensor(features[k]).float() for k in self.cfg.state_keys]
        return parts[0] if len(parts) == 1 else torch.cat(parts, dim=-1)

    def prompt(self, chats: Sequence[Sequence[Mapping[str, Any]]], *, generation: bool,
               device: torch.device | str = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
        """Right-padded (ids, mask) of chats templated as in training (a generation header if asked)."""
        rows = []
        for chat in chats:
            plain, _ = self.chat.chat(text_only(chat))
            text = self.tokenizer.apply_chat_template(plain, tools=self.tools or None, tokenize=False,
                                                      add_generation_prompt=generation)
            rows.append(self.tokenizer(text, add_special_tokens=False)["input_ids"][-self.cfg.max_length:])
        longest = max(len(r) for r in rows)
        pad = int(self.tokenizer.pad_token_id or 0)
        ids = torch.tensor([r + [pad] * (longest - len(r)) for r in rows], device=device)
        mask = torch.tensor([[1] * len(r) + [0] * (longest - len(r)) for r in rows], device=device)
        return ids, mask

    def decode(self, ids: Sequence[int]) -> str:
        """The text of `ids`, whole characters only: a byte-level tokenizer shows bytes that form no whole
        UTF-8 character (a weak model stops inside one, or emits a stray one) as U+FFFD, left out here."""
        return str(self.tokenizer.decode(list(ids), skip_special_tokens=True)).replace("\ufffd", "")
