"""Inference with a trained policy: the high-level prompts of the `hierarchical` recipe, text
generation with tool-call parsing, and action chunks in robot units.

The prompts are laid out exactly as the recipe renders its training samples (same turns, same
labels, same template; no generation header on the low-level prompt, whose training samples had
none), so live inputs are never off the training distribution in their shape.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from steerable.policy.checkpoint import LoadedPolicy
from steerable.policy.generation import GenerationConfig, ParsedReply, generate_ids, parse_reply
from steerable.policy.names import NameSlots
from steerable.policy.objects import command_relation

__all__ = [
    "PolicyRunner",
    "interjection_prompt",
    "low_level_prompt",
    "memory_prompt",
    "plan_prompt",
    "plan_update_prompt",
    "progress_prompt",
    "subtask_prompt",
]

Chat = list[dict[str, Any]]


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def subtask_prompt(task: str, plan: str | None = None, memory: str | None = None) -> Chat:
    chat = [_user(task)]
    if plan:
        chat.append(_user(f"Plan:\n{plan}"))
    if memory:
        chat.append(_user(f"Memory: {memory}"))
    return chat


def plan_prompt(task: str, memory: str | None = None) -> Chat:
    chat = [_user(task)]
    if memory:
        chat.append(_user(f"Memory: {memory}"))
    return [*chat, _user("Write the plan.")]


PROGRESS_QUESTION = "Which step now?"


def progress_prompt(task: str) -> Chat:
    """The task alone: the step to work on is read from the observation (the recipe's `progress`)."""
    return [_user(task), _user(PROGRESS_QUESTION)]


def plan_update_prompt(task: str, prior_plan: str | None, completed_subtask: str | None) -> Chat:
    chat = [_user(task)]
    if prior_plan:
        chat.append(_user(f"Plan:\n{prior_plan}"))
    if completed_subtask:
        chat.append(_user(f"Just finished: {completed_subtask}"))
    return chat


def memory_prompt(task: str, prior_memory: str | None, completed_subtask: str | None) -> Chat:
    chat = [_user(task)]
    if prior_memory:
        chat.append(_user(f"Memory so far: {prior_memory}"))
    if completed_subtask:
        chat.append(_user(f"Just finished: {completed_subtask}"))
    return chat


def interjection_prompt(task: str, plan: str | None, interjection: str) -> Chat:
    chat = [_user(task)]
    if plan:
        chat.append(_user(f"Plan:\n{plan}"))
    chat.append(_user(interjection))
    return chat


def low_level_prompt(command: str) -> Chat:
    return [_user(command)]


class PolicyRunner:
    """Batched text generation and action sampling over one loaded policy.

    An observation is a mapping with `state` (a (S,) or (B, S) array), `images` (camera key ->
    H x W x 3 uint8 frame, or a (B, H, W, 3) batch) for the cameras the policy was trained on, and,
    for a policy with `motion_input`, `motion`: the last commanded motion of the pose dimensions
    (absent: at rest; `PolicyLowLevel` keeps it).
    """

    def __init__(self, loaded: LoadedPolicy, device: str | torch.device = "cpu",
                 generation: GenerationConfig | None = None, seed: int | None = 0) -> None:
        self.loaded = loaded
        self.model = loaded.model.to(device).eval()
        self.processor = loaded.processor
        self.device = device
        self.generation = generation or GenerationConfig(max_new_tokens=64)
        self.generator = torch.Generator(device=device)
        self.slots = NameSlots(self.model.cfg.name_slots)  # built once: every text call may rename
        if seed is not None:
            self.generator.manual_seed(seed)

    @property
    def cfg(self) -> Any:
        return self.model.cfg

    def inputs(self, observation: Mapping[str, Any]) -> dict[str, Any]:
        images = {k: torch.as_tensor(np.asarray(v)) for k, v in (observation.get("images") or {}).items()}
        missing = [c for c in self.cfg.cameras if c not in images]
        if missing:
            raise ValueError(f"the observation has no frame for camera(s) {missing} (it has {sorted(images)})")
        state = torch.as_tensor(np.asarray(observation["state"], dtype=np.float32))
        seen: dict[str, Any] = {"images": images, "state": state}
        if observation.get("motion") is not None:
            seen["motion"] = torch.as_tensor(np.asarray(observation["motion"], dtype=np.float32))
        return self.processor.observation(seen, self.device)

    def generate(self, chats: Sequence[Chat], observation: Mapping[str, Any],
                 generation: GenerationConfig | None = None, *, canonical: bool = False) -> list[ParsedReply]:
        """One reply per chat (all sharing `observation`, or one per row of a batched observation).

        `canonical`: the chats are text-decided prompts (plan, memory, interjection, subtask from the
        plan): with the policy's `name_slots`, they are asked with canonical names and the replies
        mapped back to the real ones (steerable.policy.names). Without name slots it changes nothing.
        """
        if canonical and self.slots:
            renamed = [self.slots.canonical(chat) for chat in chats]
            replies = self.generate([c for c, _ in renamed], observation, generation)
            return [self.slots.restore(r, mapping) for r, (_, mapping) in zip(replies, renamed, strict=True)]
        gen = generation or self.generation
        obs = self.inputs(observation)
        ids, mask = self.processor.prompt(chats, generation=True, device=self.device)
        obs = {k: _expand(v, len(chats)) for k, v in obs.items()}
        finished: list[bool] = []
        out = generate_ids(self.model, obs.get("images"), obs.get("state"), ids, mask, gen, self.processor.eos_id,
                           self.processor.decode, finished)
        replies = [parse_reply(_cut(self.processor.decode(o), gen.stop), self.processor.tools) for o in out]
        for reply, ended in zip(replies, finished, strict=True):
            reply.truncated = not ended
        return replies

    def act(self, commands: Sequence[str], observation: Mapping[str, Any], steps: int | None = None) -> np.ndarray:
        """(B, chunk_size, action_dim) actions in robot units for each command (the low-level prompt)."""
        return self.act_and_done(commands, observation, steps)[0]

    def act_and_done(self, commands: Sequence[str], observation: Mapping[str, Any], steps: int | None = None
                     ) -> tuple[np.ndarray, np.ndarray | None]:
        """`act`'s chunks, and the (B,) probability that each command is already complete (None for a
        policy without a done head), from one backbone pass."""
        obs = self.inputs(observation)
        ids, mask = self.processor.prompt([low_level_prompt(c) for c in commands], generation=False,
                                          device=self.device)
        obs = {k: _expand(v, len(commands)) for k, v in obs.items()}
        done: list[torch.Tensor] = []
        chunk = self.model.sample_actions(obs.get("images"), obs.get("state"), ids, mask, steps=steps,
                                          generator=self.generator, done=done)
        return self.robot_actions(chunk, observation).cpu().numpy(), done[0].cpu().numpy() if done else None

    def step_took(self, command: str, observation: Mapping[str, Any]) -> float | None:
        """The probability that `command`, reported done, took (the scene shows its object where the
        command puts it); None when the policy cannot tell: trained without `step_check`, or a command
        that does not move one object of its state to another."""
        if not getattr(self.cfg, "step_check", False):
            return None
        relation = command_relation(command, self.cfg.state_names, np.asarray(observation["state"]).reshape(-1).tolist())
        if relation is None:
            return None
        obs = self.inputs(observation)
        ids, mask = self.processor.prompt([low_level_prompt(command)], generation=False, device=self.device)
        p = self.model.check_probability(obs.get("images"), obs.get("state"), ids, mask,
                                         torch.tensor([relation], device=self.device))
        return float(p[0])

    def robot_actions(self, chunk: torch.Tensor, observation: Mapping[str, Any]) -> torch.Tensor:
        """A normalised (B, H, A) chunk of the model -> robot units (relative dimensions added to the
        observation's state)."""
        return self.processor.robot_actions(chunk, self._state(observation, chunk.shape[0]))

    def model_actions(self, actions: torch.Tensor, observation: Mapping[str, Any]) -> torch.Tensor:
        """(B, H, A) robot actions -> the model's normalised representation, relative to the
        observation's state (what real-time chunking's guidance pulls toward)."""
        return self.processor.model_actions(actions, self._state(observation, actions.shape[0]))

    def _state(self, observation: Mapping[str, Any], batch: int) -> torch.Tensor | None:
        if not self.cfg.relative_pairs:
            return None
        state = torch.as_tensor(np.asarray(observation["state"], dtype=np.float32)).reshape(-1, self.cfg.state_dim)
        return _expand(state, batch)


def _expand(x: torch.Tensor, n: int) -> torch.Tensor:
    return x.expand(n, *x.shape[1:]) if x.shape[0] == 1 and n > 1 else x


def _cut(text: str, stops: Sequence[str]) -> str:
    for stop in stops:
        if stop in text:
            text = text[: text.index(stop)]
    return text
