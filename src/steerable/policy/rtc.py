"""Real-time chunking for the flow-matching action expert: a new chunk whose start continues the
motion under way (`steerable run --inference rtc`).

While a chunk is being computed the robot keeps executing the previous one, so the new chunk's
first steps are already fixed (they run during the inference) and the next few should stay close
to what was planned for them, or the arm jumps where the chunks meet. This is inpainting with
guidance, after Black et al., "Real-Time Execution of Action Chunking Flow Policies" (2025): at
every Euler step the expert's estimate of the clean chunk is pulled toward the queued actions,
weighted by a soft mask (1 on the steps executed during the inference, then decaying to 0), through
a vector-Jacobian product of that estimate with respect to the noisy chunk. The guidance weight
follows the flow time and is bounded by `max_guidance`, so early (noisy) steps are not over-driven.

Flow convention (`steerable.policy.expert`): x_t = t * noise + (1 - t) * actions, velocity
noise - actions, integrated from t = 1 to t = 0; the clean estimate is x_t - t * v.
`PrefixGuidance` is the `guide` hook of `HierarchicalPolicy.sample_actions` and works with any
velocity function of that convention (a benchmark's analytic flow, too).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from steerable.control import ChunkPrefix
from steerable.policy.inference import PolicyObservation, PolicyRunner

__all__ = ["PrefixGuidance", "guidance_weight", "guided_chunk"]

Velocity = Callable[[torch.Tensor], torch.Tensor]


def guidance_weight(t: torch.Tensor, max_guidance: float) -> torch.Tensor:
    """The guidance weight at flow time `t` (1 = noise): ((1-t)^2 + t^2) / ((1-t) t), at most
    `max_guidance` (it grows without bound at both ends of the path)."""
    t = t.clamp(1e-6, 1 - 1e-6)
    return (((1 - t) ** 2 + t**2) / ((1 - t) * t)).clamp(max=max_guidance)


class PrefixGuidance:
    """Velocity guidance toward `target` (B, H, A) on the steps `weights` (H,) marks, in the space the
    flow runs in (normalised actions for the policy)."""

    def __init__(self, target: torch.Tensor, weights: torch.Tensor, max_guidance: float) -> None:
        self.target = target
        self.weights = weights
        self.max_guidance = max_guidance

    def __call__(self, x: torch.Tensor, t: torch.Tensor, velocity: Velocity) -> torch.Tensor:
        """The guided velocity at noisy chunk `x` (B, H, A), flow time `t` (B,)."""
        with torch.enable_grad():
            noisy = x.detach().requires_grad_(True)
            v = velocity(noisy)
            clean = noisy - t.view(-1, 1, 1).to(noisy.dtype) * v
            error = (self.target.to(clean.dtype) - clean) * self.weights.to(clean.dtype)[None, :, None]
            (pull,) = torch.autograd.grad(clean, noisy, grad_outputs=error.detach())
        scale = guidance_weight(t.float(), self.max_guidance).view(-1, 1, 1).to(v.dtype)
        return v.detach() - scale * pull


def _padded(prefix: ChunkPrefix, horizon: int, to_model: Callable[[torch.Tensor], torch.Tensor],
            device: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """The prefix as a (1, horizon, A) target in the model's space and its (horizon,) weights; steps
    past the queued actions get weight 0."""
    actions = np.asarray(prefix.actions, dtype=np.float32)[:horizon]
    m = len(actions)
    target = to_model(torch.as_tensor(actions, device=device))
    out = torch.zeros(1, horizon, target.shape[-1], device=device)
    weights = torch.zeros(horizon, device=device)
    if m:
        out[0, :m] = target
        weights[:m] = torch.as_tensor(np.asarray(prefix.weights, dtype=np.float32)[:m], device=device)
    return out, weights


def guided_chunk(runner: PolicyRunner, command: str, observation: PolicyObservation, prefix: ChunkPrefix,
                 steps: int | None = None, done: list[torch.Tensor] | None = None) -> np.ndarray:
    """A (chunk_size, action_dim) chunk in robot units for `command`, its start guided onto `prefix`
    (robot units too; the guidance runs in the model's space, `PolicyRunner.model_actions`):
    `PolicyRunner.act` with the guidance hook (`steps` Euler steps; None: the policy's `flow_steps`).
    `done`, a list, gets the (1,) probability that the command is complete, as from `act_and_done`
    (policies with a done head)."""
    obs = runner.inputs(observation)
    ids, mask = runner.processor.prompt([runner.command_chat(command)], generation=False, device=runner.device)

    def to_model(actions: torch.Tensor) -> torch.Tensor:
        return runner.model_actions(actions[None], observation)[0]

    target, weights = _padded(prefix, runner.cfg.chunk_size, to_model, ids.device)
    # One Euler step moves by weight / steps of the gap to the target: a weight above the step count
    # overshoots the prefix, and over a few steps the overshoot grows instead of settling.
    n = steps or runner.cfg.flow_steps
    guide = PrefixGuidance(target, weights, min(prefix.max_guidance, float(n)))
    chunk = runner.model.sample_actions(obs.get("images"), obs.get("state"), ids, mask, steps=steps,
                                        generator=runner.generator, guide=guide, done=done)
    return np.asarray(runner.robot_actions(chunk, observation).cpu().numpy()[0])
