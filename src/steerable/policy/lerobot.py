"""LeRobot's policy interface over a trained policy: `reset`, `select_action`,
`predict_action_chunk`, `forward`, so LeRobot's rollout, evaluation and training loops can drive it.

`LeRobotInterface` holds the methods, lerobot-free; `SteerablePolicy` is them on a plain
`nn.Module`, and `lerobot_plugin.SteerableHierarchicalPolicy` on LeRobot's `PreTrainedPolicy` (the
`steerable_hierarchical` plugin). Batches use LeRobot's keys: camera keys (`observation.images.*`,
float (B, 3, H, W) in [0, 1] or uint8 (B, H, W, 3)), the state keys (`observation.state`), `task`
(one string per env). A chunk is predicted hierarchically: the policy writes each env's subtask
from its task, then samples the actions conditioned on that subtask; `last_subtasks` records what
it wrote. A policy that reads the last commanded motion gets it from the actions it handed out.

`forward` takes a training batch and returns (loss, loss dict). Its language: the batch's
`messages`, `message_streams`, `target_message_indices` when it has them (rendered before the
policy, e.g. by LeRobot's `RenderMessagesStep`); otherwise steerable's renderer renders the policy's
recipe from the dataset's language columns, and the action chunks are the ones `steerable train`
trains on (`TrainingFrames`). Without a dataset, each frame is the plain-task low-level sample over
LeRobot's action chunk and `action_is_pad`.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from steerable.control import LanguageContext
from steerable.dataset import LeRobotDataset
from steerable.policy.checkpoint import LoadedPolicy, load_policy
from steerable.policy.config import PolicyConfig
from steerable.policy.episodes import EpisodeActions, episode_actions
from steerable.policy.generation import GenerationConfig
from steerable.policy.inference import PolicyObservation, PolicyRunner
from steerable.policy.names import SLOT_COMPONENTS
from steerable.recipes import Recipe
from steerable.train import RecipeDataset, task_fallback

__all__ = ["LeRobotInterface", "SteerablePolicy", "TrainingFrames"]

logger = logging.getLogger(__name__)

_SAMPLE_KEYS = ("messages", "message_streams", "target_message_indices")
# A subtask is one short line (the synthetic data's need at most 8 tokens): the budget bounds what an
# untrained model that never stops costs per chunk.
SUBTASK_GENERATION = GenerationConfig(max_new_tokens=24, stop=("\n",))


def _frames(value: Any) -> torch.Tensor:
    """LeRobot float (B, 3, H, W) in [0, 1] -> uint8 (B, H, W, 3); uint8 HWC passes through."""
    x = torch.as_tensor(value)
    if x.ndim == 3:
        x = x[None]
    if x.dtype != torch.uint8 and x.shape[1] == 3:
        x = (x.float().clamp(0, 1) * 255).round().to(torch.uint8).permute(0, 2, 3, 1)
    return x.cpu()


def _ints(value: Any) -> list[int]:
    return [int(v) for v in torch.as_tensor(value).reshape(-1).tolist()]


def _tasks(batch: Mapping[str, Any], n: int) -> list[str]:
    tasks = batch.get("task") or [""]
    tasks = [tasks] if isinstance(tasks, str) else [str(t) for t in tasks]
    return tasks * n if len(tasks) == 1 else tasks


class TrainingFrames:
    """steerable's side of the frames of a LeRobot training batch, as `steerable train` builds them: the
    recipe's chat sample, rendered by steerable's renderer from the dataset's language columns
    (LeRobot's collate drops those columns, so the frames are found again by `episode_index` and the
    global `index`; a frame the recipe renders nothing for is the plain-task low-level sample), and the
    action chunk, its mask and the last commanded motion (`EpisodeActions`: pauses skipped where the
    policy is configured so). The cameras and the state are LeRobot's."""

    def __init__(self, dataset: LeRobotDataset, recipe: Recipe, cfg: PolicyConfig) -> None:
        self.dataset = dataset
        self.cfg = cfg
        self.frames = RecipeDataset(dataset, recipe, features=(), decode_images=False, cache_episodes=64)
        starts = np.cumsum([0] + [e.length for e in dataset.episodes]).tolist()
        # episode -> (its first position in `frames`, the global index of its first frame)
        self._start = {e.episode_index: (int(s), int(e.from_index))
                       for e, s in zip(dataset.episodes, starts, strict=False)}
        self._actions: dict[int, EpisodeActions] = {}

    def batch(self, episodes: Sequence[int], indices: Sequence[int], tasks: Sequence[str]) -> dict[str, Any]:
        """`messages`, `message_streams`, `target_message_indices`, `actions`, `action_mask` (and `motion`
        for a policy that reads it) of these frames."""
        out: dict[str, Any] = {k: [] for k in _SAMPLE_KEYS}
        chunks, masks, motions = [], [], []
        for episode, index, task in zip(episodes, indices, tasks, strict=True):
            if episode not in self._start:
                raise KeyError(f"episode {episode} of the training batch is not in {self.dataset.root}")
            start, first = self._start[episode]
            row = index - first
            item = self.frames[start + row]
            sample = item if item is not None else _fallback(task)
            for key in _SAMPLE_KEYS:
                out[key].append(sample[key])
            actions = self._actions.get(episode)
            if actions is None:
                actions = self._actions[episode] = episode_actions(self.dataset, self.cfg, episode)
            chunk, mask = actions.chunk(row)
            chunks.append(chunk)
            masks.append(mask)
            motions.append(actions.motion(row))
        out["actions"] = torch.from_numpy(np.stack(chunks))
        out["action_mask"] = torch.from_numpy(np.stack(masks))
        if self.cfg.motion_dim:
            out["motion"] = torch.from_numpy(np.stack(motions))
        return out


def _fallback(task: str) -> dict[str, Any]:
    sample = task_fallback(task or " ")  # a sample always renders: an empty task reads as one space
    assert sample is not None
    return sample.to_dict()


class LeRobotInterface:
    """LeRobot's policy methods over `runner` (a `PolicyRunner`). `config` has the `PolicyConfig`
    names these read (`cameras`, `action_key`, `n_action_steps`, `flow_steps`); `frames` builds the
    training samples of a batch from the policy's dataset (None: from the batch alone)."""

    runner: PolicyRunner
    config: Any
    frames: TrainingFrames | None
    _queue: deque[torch.Tensor]
    _executed: deque[torch.Tensor]
    last_subtasks: list[str]

    def _start_interface(self, runner: PolicyRunner, frames: TrainingFrames | None = None) -> None:
        self.runner = runner
        self.frames = frames
        self._queue = deque()
        self._executed = deque(maxlen=2)  # the last two actions handed out (B, A): the last motion
        self.last_subtasks = []

    def reset(self) -> None:
        """Drop queued actions and forget the motion (call at the start of every episode)."""
        self._queue.clear()
        self._executed.clear()
        self.last_subtasks = []

    def _observation(self, batch: Mapping[str, Any]) -> PolicyObservation:
        obs: PolicyObservation = {"images": {c: _frames(batch[c]) for c in self.config.cameras},
                                  "state": self.runner.processor.state_from(batch).cpu()}
        cfg = self.runner.cfg
        if cfg.motion_dim and len(self._executed) == 2:  # at rest until two actions have run
            pose = [a for a, _ in cfg.pose_pairs]
            obs["motion"] = (self._executed[1] - self._executed[0])[:, pose].float().cpu()
        return obs

    @torch.no_grad()
    def predict_action_chunk(self, batch: Mapping[str, Any], **kwargs: Any) -> torch.Tensor:
        """(B, chunk_size, action_dim) actions: each env's subtask is generated first, then acted on
        (`kwargs`: what `_act` reads, LeRobot's real-time chunking arguments in the plugin)."""
        obs = self._observation(batch)
        state = np.asarray(obs["state"])
        tasks = _tasks(batch, state.reshape(-1, state.shape[-1]).shape[0])
        subtasks = self._subtasks(tasks, obs)
        if subtasks != self.last_subtasks:  # what the high level decided, in the host's log (LeRobot's scripts)
            logger.info("steerable_hierarchical: subtask %s for task %s", ", ".join(map(repr, subtasks)),
                        ", ".join(map(repr, tasks)))
        self.last_subtasks = subtasks
        return torch.from_numpy(self._act(subtasks, obs, **kwargs))

    def _subtasks(self, tasks: list[str], obs: PolicyObservation) -> list[str]:
        """Each env's subtask, written from its task alone by the recipe's `subtask` question; a recipe
        that trains none acts on the task itself, as does an empty generation."""
        prompts = self.runner.prompts
        if not prompts.has("subtask"):
            return list(tasks)
        asked = [prompts.render("subtask", LanguageContext(task=t)) for t in tasks]
        replies = self.runner.generate([p.messages for p in asked], obs, SUBTASK_GENERATION,
                                       canonical=asked[0].component in SLOT_COMPONENTS)
        return [reply.text.strip() or task for reply, task in zip(replies, tasks, strict=True)]

    def _act(self, subtasks: list[str], obs: PolicyObservation, **kwargs: Any) -> np.ndarray:
        """(B, chunk_size, action_dim) robot actions acting on each env's subtask."""
        return self.runner.act(subtasks, obs, steps=self.config.flow_steps)

    @torch.no_grad()
    def select_action(self, batch: Mapping[str, Any], **kwargs: Any) -> torch.Tensor:
        """(B, action_dim): the next action, from a queue refilled with a new chunk when empty."""
        if not self._queue:
            chunk = self.predict_action_chunk(batch)[:, : self.config.n_action_steps]
            self._queue.extend(chunk.transpose(0, 1))
        action = self._queue.popleft()
        self._executed.append(action)
        return action

    def forward(self, batch: Mapping[str, Any]) -> tuple[torch.Tensor, dict[str, float]]:
        """(loss, {"loss", "text_loss", "flow_loss"}) of a training batch (see the module docstring)."""
        data: dict[str, Any] = dict(batch)
        data["images"] = {c: _frames(batch[c]) for c in self.config.cameras}
        data["state"] = state = self.runner.processor.state_from(batch)
        n = state.reshape(-1, state.shape[-1]).shape[0]
        tasks = _tasks(batch, n)
        if self.frames is not None and "episode_index" in batch and "index" in batch:
            data.update(self.frames.batch(_ints(batch["episode_index"]), _ints(batch["index"]), tasks))
        else:
            actions = torch.as_tensor(batch[self.config.action_key])
            actions = actions[:, None] if actions.ndim == 2 else actions
            pad = batch.get("action_is_pad")
            pad = torch.zeros(actions.shape[:2], dtype=torch.bool) if pad is None else torch.as_tensor(pad)
            data["actions"] = actions
            data["action_mask"] = (~pad.bool())[..., None].expand_as(actions)
            samples = [_fallback(t) for t in tasks]
            data.update({k: [sample[k] for sample in samples] for k in _SAMPLE_KEYS})
        if all(k in batch for k in _SAMPLE_KEYS):  # rendered before the policy (LeRobot's rendering step)
            data.update({k: list(batch[k]) for k in _SAMPLE_KEYS})
        training = isinstance(self, nn.Module) and self.training  # lerobot-train shifts images as steerable train
        prepared = self.runner.processor.training_batch(data, self.runner.device, augment=training)
        out = self.runner.model(prepared)
        return out["loss"], {k: out[k].item() for k in ("loss", "text_loss", "flow_loss")}


class SteerablePolicy(LeRobotInterface, nn.Module):
    """A trained hierarchical policy behind LeRobot's `PreTrainedPolicy` method names (no LeRobot needed)."""

    name = "steerable_hierarchical"

    def __init__(self, loaded: LoadedPolicy, device: str | torch.device = "cpu") -> None:
        nn.Module.__init__(self)
        runner = PolicyRunner(loaded, device)
        self.model = runner.model
        self.config = self.model.cfg
        self._start_interface(runner)

    @classmethod
    def from_pretrained(cls, path: str | Path, device: str | torch.device = "cpu") -> SteerablePolicy:
        return cls(load_policy(path, device), device)
