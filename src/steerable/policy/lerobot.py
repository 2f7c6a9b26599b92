"""LeRobot's policy interface over a trained policy: `reset`, `select_action`,
`predict_action_chunk`, `forward`, so LeRobot-style rollout and evaluation loops can drive it.

Batches use LeRobot's keys: camera keys (`observation.images.*`, float (B, 3, H, W) in [0, 1] or
uint8 (B, H, W, 3)), the state key (`observation.state`), `task` (one string per env). A chunk is
predicted hierarchically: the policy writes each env's subtask from its task, then samples the
actions conditioned on that subtask; `last_subtasks` records what it wrote. `forward` takes a
training batch (recipe-rendered `messages`, `message_streams`, `target_message_indices`, the
action chunk under the action key with LeRobot's `action_is_pad`) and returns (loss, loss dict).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from torch import nn

from steerable.policy.checkpoint import LoadedPolicy, load_policy
from steerable.policy.inference import PolicyRunner, subtask_prompt

__all__ = ["SteerablePolicy"]


def _frames(value: Any) -> torch.Tensor:
    """LeRobot float (B, 3, H, W) in [0, 1] -> uint8 (B, H, W, 3); uint8 HWC passes through."""
    x = torch.as_tensor(value)
    if x.ndim == 3:
        x = x[None]
    if x.dtype != torch.uint8 and x.shape[1] == 3:
        x = (x.float().clamp(0, 1) * 255).round().to(torch.uint8).permute(0, 2, 3, 1)
    return x.cpu()


class SteerablePolicy(nn.Module):
    """A trained hierarchical policy behind LeRobot's `PreTrainedPolicy` method names."""

    name = "steerable_hierarchical"

    def __init__(self, loaded: LoadedPolicy, device: str | torch.device = "cpu") -> None:
        super().__init__()
        self.runner = PolicyRunner(loaded, device)
        self.model = self.runner.model
        self.config = self.model.cfg
        self._queue: deque[torch.Tensor] = deque()
        self.last_subtasks: list[str] = []

    @classmethod
    def from_pretrained(cls, path: str | Path, device: str | torch.device = "cpu") -> SteerablePolicy:
        return cls(load_policy(path, device), device)

    def reset(self) -> None:
        """Drop queued actions (call at the start of every episode)."""
        self._queue.clear()
        self.last_subtasks = []

    def _observation(self, batch: Mapping[str, Any]) -> dict[str, Any]:
        return {"images": {c: _frames(batch[c]) for c in self.config.cameras},
                "state": self.runner.processor.state_from(batch).cpu()}

    @torch.no_grad()
    def predict_action_chunk(self, batch: Mapping[str, Any]) -> torch.Tensor:
        """(B, chunk_size, action_dim) actions: each env's subtask is generated first, then acted on."""
        obs = self._observation(batch)
        tasks = batch.get("task") or [""]
        tasks = [tasks] if isinstance(tasks, str) else list(tasks)
        n = obs["state"].shape[0] if obs["state"].ndim == 2 else 1
        tasks = tasks * n if len(tasks) == 1 else tasks
        subtasks = []
        for i, task in enumerate(tasks):
            row = {"images": {k: v[i:i + 1] for k, v in obs["images"].items()}, "state": obs["state"].reshape(n, -1)[i]}
            reply = self.runner.generate([subtask_prompt(task)], row)[0]
            subtasks.append(reply.text or task)  # an empty generation falls back to the task itself
        self.last_subtasks = subtasks
        return torch.from_numpy(self.runner.act(subtasks, obs))

    @torch.no_grad()
    def select_action(self, batch: Mapping[str, Any]) -> torch.Tensor:
        """(B, action_dim): the next action, from a queue refilled with a new chunk when empty."""
        if not self._queue:
            chunk = self.predict_action_chunk(batch)[:, : self.config.n_action_steps]
            self._queue.extend(chunk.transpose(0, 1))
        return self._queue.popleft()

    def forward(self, batch: Mapping[str, Any]) -> tuple[torch.Tensor, dict[str, float]]:
        """(loss, {"loss", "text_loss", "flow_loss"}) of a recipe-rendered training batch."""
        data = dict(batch)
        data["images"] = {c: _frames(batch[c]) for c in self.config.cameras}
        data["state"] = self.runner.processor.state_from(batch)
        actions = torch.as_tensor(batch[self.config.action_key])
        if actions.ndim == 2:
            actions = actions[:, None]
        pad = torch.as_tensor(batch.get("action_is_pad", torch.zeros(actions.shape[:2], dtype=torch.bool)))
        data["actions"] = actions
        data["action_mask"] = (~pad.bool())[..., None].expand_as(actions)
        prepared = self.runner.processor.training_batch(data, self.runner.device)
        out = self.model(prepared)
        return out["loss"], {k: out[k].item() for k in ("loss", "text_loss", "flow_loss")}
