"""Between the world and the model: normalisation, camera frames, chat prompts, training batches.

The same object prepares a training batch and a live observation, so training and inference use
one tokenizer, one chat template, one state encoding and one image order. Normalisation: state
min/max to [-1, 1] (what the 256-bin discretisation expects), actions by mean/std.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from steerable.policy.config import PolicyConfig
from steerable.train.tokenize import ChatTokenizer

__all__ = ["Normalizer", "Processor", "prepare_images", "text_only"]


@dataclass
class Normalizer:
    """Per-dimension statistics of the state (min, max) and the action (mean, std)."""

    state_min: list[float]
    state_max: list[float]
    action_mean: list[float]
    action_std: list[float]

    @classmethod
    def fit(cls, states: np.ndarray, actions: np.ndarray) -> Normalizer:
        return cls(states.min(0).tolist(), states.max(0).tolist(), actions.mean(0).tolist(), actions.std(0).tolist())

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


def prepare_images(frames: Sequence[torch.Tensor], size: int) -> torch.Tensor:
    """Per camera a (B, H, W, 3) uint8 tensor -> (B, cameras, 3, size, size) floats in [-1, 1]."""
    out = []
    for frame in frames:
        x = frame.permute(0, 3, 1, 2).float() / 255.0
        if x.shape[-2:] != (size, size):
            x = F.interpolate(x, size=(size, size), mode="bilinear", align_corners=False, antialias=True)
        out.append(x * 2 - 1)
    return torch.stack(out, dim=1)


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

    def training_batch(self, batch: Mapping[str, Any], device: torch.device | str = "cpu") -> dict[str, Any]:
        """Model inputs of a collated batch: images, state, tokens and labels, normalised action chunks."""
        messages = [text_only(m) for m in batch["messages"]]
        tok = self.chat({"messages": messages, "message_streams": batch["message_streams"],
                         "target_message_indices": batch["target_message_indices"]})
        assert tok is not None
        out: dict[str, Any] = {k: tok[k].to(device) for k in ("input_ids", "attention_mask", "labels", "predict_actions")}
        out.update(self.observation(batch, device))
        if "actions" in batch:
            out["actions"] = self.normalizer.action(batch["actions"]).to(device)
            out["action_mask"] = batch["action_mask"].to(device)
        return out

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
            out["state"] = self.normalizer.state(state[None] if state.ndim == 1 else state).to(device)
        return out

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
        return str(self.tokenizer.decode(list(ids), skip_special_tokens=True))
