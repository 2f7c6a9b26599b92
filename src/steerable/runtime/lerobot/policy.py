"""A LeRobot policy as steerable's low level (being rebuilt on LeRobot's factory and processors: #19)."""

from __future__ import annotations

from typing import Any

import numpy as np

from steerable.control import ActionChunk, Observation
from steerable.errors import MissingExtraError

__all__ = ["LeRobotPolicyController"]


def _torch() -> Any:
    try:
        import torch
    except ImportError as exc:
        raise MissingExtraError("torch", "train") from exc
    return torch


class LeRobotPolicyController:
    """A `LowLevelController` over a LeRobot-style policy, conditioned on the command as `task`.

    The batch is what LeRobot policies read: `observation.state` (1, D) float32, each camera
    `observation.images.*` (1, 3, H, W) float32 in [0, 1], and `task` = [command].
    """

    wants_images = True

    def __init__(self, policy: Any, *, device: str = "cpu", name: str | None = None) -> None:
        self.policy = policy
        self.device = device
        kind = getattr(getattr(policy, "config", None), "type", None) or type(policy).__name__
        self.name = name or f"LeRobot policy ({kind})"

    def reset(self) -> None:
        self.policy.reset()

    def batch(self, observation: Observation, command: str) -> dict[str, Any]:
        torch = _torch()
        batch: dict[str, Any] = {
            "observation.state": torch.as_tensor(np.asarray(observation.state, dtype=np.float32))[None].to(self.device),
            "task": [command],
        }
        for key, image in observation.images.items():
            chw = torch.as_tensor(np.ascontiguousarray(image)).permute(2, 0, 1).float().div(255.0)
            batch[key] = chw[None].to(self.device)
        return batch

    def act(self, observation: Observation, command: str) -> ActionChunk:
        torch = _torch()
        batch = self.batch(observation, command)
        with torch.inference_mode():
            predict = getattr(self.policy, "predict_action_chunk", None)
            out = predict(batch) if callable(predict) else self.policy.select_action(batch)
        actions = out.detach().to("cpu").float().numpy()
        if actions.ndim == 3:  # (batch, n, dim)
            actions = actions[0]
        return ActionChunk(actions.reshape(-1, actions.shape[-1]).astype(np.float32))
