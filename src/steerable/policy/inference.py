"""Inference with a trained policy: text generation with tool-call parsing, and action chunks in
robot units.

The runner takes chats. Every prompt it is given, and the low-level prompt it builds for a command,
is rendered from the checkpoint's own recipe (`recipe.yaml`) by `steerable.recipes.live`, as training
rendered its samples (same turns, same template; no generation header on the low-level prompt, whose
training samples had none), so live inputs are never off the training distribution in their shape.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypedDict

import numpy as np
import torch
from numpy.typing import ArrayLike

from steerable.control import LanguageContext
from steerable.errors import ConfigError
from steerable.policy.checkpoint import LoadedPolicy
from steerable.policy.config import PolicyConfig
from steerable.policy.generation import GenerationConfig, ParsedReply, generate_ids, parse_reply
from steerable.policy.names import NameSlots
from steerable.policy.objects import command_relation, object_layout
from steerable.recipes.live import LivePrompts

__all__ = ["Chat", "PolicyObservation", "PolicyRunner"]

Chat = list[dict[str, Any]]


class _State(TypedDict):
    state: ArrayLike  # (S,) or (B, S): the policy's state vector, its `state_keys` concatenated in order


class PolicyObservation(_State, total=False):
    """What a policy runner reads of the scene: the one shape the runtime builds
    (`steerable.runtime.policy_observation`) and the policy's host (`steerable.policy.lerobot`) hands it.

    Arrays or tensors (anything `np.asarray` reads). `images`: camera key -> H x W x 3 uint8 frame, or a
    (B, H, W, 3) batch, for the cameras the policy was trained on (absent: none). `motion`: the last
    commanded motion of the pose dimensions, for a policy with `motion_input` (absent or None: at rest).
    """

    images: Mapping[str, ArrayLike]
    motion: ArrayLike | None


class PolicyRunner:
    """Batched text generation and action sampling over one loaded policy; every observation is a
    `PolicyObservation` (its motion is kept by `PolicyLowLevel`)."""

    def __init__(self, loaded: LoadedPolicy, device: str | torch.device = "cpu",
                 generation: GenerationConfig | None = None, seed: int | None = 0) -> None:
        self.loaded = loaded
        self.model = loaded.model.to(device).eval()
        self.processor = loaded.processor
        self.device = device
        self.generation = generation or GenerationConfig(max_new_tokens=64)
        self.generator = torch.Generator(device=device)
        self.slots = NameSlots(self.model.cfg.name_slots)  # built once: every text call may rename
        # Every prompt, from the recipe the checkpoint was trained on (a bad one fails here, in one line).
        self.prompts = LivePrompts.from_text(loaded.recipe_text, origin=str(Path(loaded.path) / "recipe.yaml"))
        if seed is not None:
            self.generator.manual_seed(seed)

    @property
    def cfg(self) -> PolicyConfig:
        """The checkpoint's configuration: what the runtime reads of the policy (cameras, state keys, ...)."""
        return self.model.cfg

    def command_chat(self, command: str) -> Chat:
        """The low-level prompt of `command`: the recipe's `action` question (a ConfigError, in one
        line, for a recipe that trains no action conditioned on the command alone)."""
        return self.prompts.render("action", LanguageContext(subtask=command)).messages

    def inputs(self, observation: PolicyObservation) -> dict[str, Any]:
        images = {k: torch.as_tensor(np.asarray(v)) for k, v in (observation.get("images") or {}).items()}
        missing = [c for c in self.cfg.cameras if c not in images]
        if missing:
            raise ConfigError(f"the policy reads camera(s) {', '.join(missing)}, which the observation lacks "
                              f"(it has {', '.join(sorted(images)) or 'none'}): run it with the cameras it was "
                              "trained on")
        state = torch.as_tensor(np.asarray(observation["state"], dtype=np.float32))
        seen: dict[str, Any] = {"images": images, "state": state}
        motion = observation.get("motion")
        if motion is not None:
            seen["motion"] = torch.as_tensor(np.asarray(motion, dtype=np.float32))
        return self.processor.observation(seen, self.device)

    def generate(self, chats: Sequence[Chat], observation: PolicyObservation,
                 generation: GenerationConfig | None = None, *, canonical: bool = False) -> list[ParsedReply]:
        """One reply per chat (all sharing `observation`, or one per row of a batched observation).

        `canonical`: the chats were rendered by a component whose training samples were renamed
        (`names.SLOT_COMPONENTS`: plan, memory, interjection, subtask from the plan): with the policy's
        `name_slots`, they are asked with canonical names and the replies mapped back to the real ones
        (steerable.policy.names). Without name slots it changes nothing.
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

    def act(self, commands: Sequence[str], observation: PolicyObservation, steps: int | None = None) -> np.ndarray:
        """(B, chunk_size, action_dim) actions in robot units for each command (the low-level prompt)."""
        return self.act_and_done(commands, observation, steps)[0]

    def act_and_done(self, commands: Sequence[str], observation: PolicyObservation, steps: int | None = None
                     ) -> tuple[np.ndarray, np.ndarray | None]:
        """`act`'s chunks, and the (B,) probability that each command is already complete (None for a
        policy without a done head), from one backbone pass."""
        obs = self.inputs(observation)
        ids, mask = self.processor.prompt([self.command_chat(c) for c in commands], generation=False,
                                          device=self.device)
        obs = {k: _expand(v, len(commands)) for k, v in obs.items()}
        done: list[torch.Tensor] = []
        chunk = self.model.sample_actions(obs.get("images"), obs.get("state"), ids, mask, steps=steps,
                                          generator=self.generator, done=done)
        return self.robot_actions(chunk, observation).cpu().numpy(), done[0].cpu().numpy() if done else None

    def step_took(self, command: str, observation: PolicyObservation) -> float | None:
        """The probability that `command`, reported done, took (the scene shows its object where the
        command puts it, or, checked from the cameras, shows it as where that command was done in the
        demonstrations); None when the policy cannot tell: trained without `step_check`, or, without
        the cameras' check, a command that does not move one object of its state to another."""
        if not self.cfg.step_check or self.model.check_out is None:
            return None
        relation = None
        if not self.model.check_cameras:
            state = np.asarray(observation["state"]).reshape(-1).tolist()
            relation = command_relation(command, object_layout(self.cfg), state)
            if relation is None:
                return None
        obs = self.inputs(observation)
        ids, mask = self.processor.prompt([self.command_chat(command)], generation=False, device=self.device)
        p = self.model.check_probability(obs.get("images"), obs.get("state"), ids, mask,
                                         None if relation is None else torch.tensor([relation], device=self.device))
        return float(p[0])

    def robot_actions(self, chunk: torch.Tensor, observation: PolicyObservation) -> torch.Tensor:
        """A normalised (B, H, A) chunk of the model -> robot units (relative dimensions added to the
        observation's state)."""
        return self.processor.robot_actions(chunk, self._state(observation, chunk.shape[0]))

    def model_actions(self, actions: torch.Tensor, observation: PolicyObservation) -> torch.Tensor:
        """(B, H, A) robot actions -> the model's normalised representation, relative to the
        observation's state (what real-time chunking's guidance pulls toward)."""
        return self.processor.model_actions(actions, self._state(observation, actions.shape[0]))

    def _state(self, observation: PolicyObservation, batch: int) -> torch.Tensor | None:
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
