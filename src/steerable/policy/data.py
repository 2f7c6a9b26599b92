"""Training items for the policy: a rendered recipe sample, the cameras, the state, an action chunk.

Built on `steerable.train.RecipeDataset` (the recipe decides streams and targets). Each item adds
the action chunk starting at its frame with a mask that is False past the episode's end (those
steps repeat the last action and never enter the loss), and every configured camera at the policy's image
size. An episode's frames are decoded once, resized, and kept (small at policy resolution).

Events (an interjection and its spoken reply) sit on single frames, so a blend component that reads
them (the interjection reply) would be drawn on a handful of samples per run. `event_repeat` adds
each event frame that many more times, rendered through each such component alone.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch.utils.data import Dataset

from steerable.dataset import LeRobotDataset
from steerable.dataset.frames import feature_matrix
from steerable.errors import ConfigError
from steerable.policy.config import PolicyConfig
from steerable.policy.processor import Normalizer
from steerable.recipes import Recipe
from steerable.train import RecipeDataset

__all__ = ["PolicyDataset", "event_components", "fit_normalizer", "split_episodes"]

logger = logging.getLogger(__name__)


def split_episodes(
    dataset: LeRobotDataset, eval_fraction: float, seed: int = 0, only: Sequence[int] | None = None,
) -> tuple[list[int], list[int]]:
    """(train, held-out) episode indices of `only` (default: every episode): a seeded draw of
    `eval_fraction` (at least one when possible)."""
    episodes = [e.episode_index for e in dataset.episodes]
    if only is not None:
        unknown = sorted(set(only) - set(episodes))
        if unknown:
            raise ConfigError(f"--episodes {unknown}: not in the dataset (it has {len(episodes)} episodes, "
                              f"indices {episodes[0]}-{episodes[-1]})" if episodes else "the dataset has no episodes")
        chosen = set(only)
        episodes = [e for e in episodes if e in chosen]
    if eval_fraction <= 0 or len(episodes) < 2:
        return episodes, []
    rng = np.random.default_rng(seed)
    n_eval = max(1, round(len(episodes) * eval_fraction))
    held = set(rng.choice(episodes, size=n_eval, replace=False).tolist())
    return [e for e in episodes if e not in held], sorted(held)


def fit_normalizer(dataset: LeRobotDataset, cfg: PolicyConfig, episodes: Sequence[int]) -> Normalizer:
    """State min/max and action mean/std over `episodes`."""
    states, actions = [], []
    for e in episodes:
        table = dataset.read_episode(e, [*cfg.state_keys, cfg.action_key])
        states.append(np.concatenate([feature_matrix(table, k) for k in cfg.state_keys], axis=1))
        actions.append(feature_matrix(table, cfg.action_key))
    return Normalizer.fit(np.concatenate(states).astype(np.float64), np.concatenate(actions).astype(np.float64))


class PolicyDataset(Dataset[dict[str, Any] | None]):
    """Items of `episodes` (all by default): RecipeDataset fields plus `actions`, `action_mask`, `state`
    (the `state_keys` features concatenated)."""

    def __init__(self, dataset: LeRobotDataset, recipe: Recipe, cfg: PolicyConfig, image_size: int,
                 episodes: Sequence[int] | None = None, cache_episodes: int = 256, event_repeat: int = 0) -> None:
        features = (*cfg.state_keys, cfg.action_key)
        self.frames = RecipeDataset(dataset, recipe, features=features, decode_images=False)
        self.dataset = dataset
        self.cfg = cfg
        self.image_size = image_size
        wanted = set(episodes) if episodes is not None else None
        self.positions = [i for i, ep in enumerate(_episode_of_each_frame(dataset)) if wanted is None or ep in wanted]
        # (frame position, blend component) items added on event frames.
        self.extra: list[tuple[int, str]] = []
        components = event_components(recipe) if event_repeat > 0 else []
        if components:
            chosen = [e.episode_index for e in dataset.episodes if wanted is None or e.episode_index in wanted]
            for ep in chosen:
                for pos in self.frames.event_frames(ep):
                    self.extra += [(pos, name) for name in components for _ in range(event_repeat)]
        self.cache_episodes = cache_episodes
        self._actions: dict[int, np.ndarray] = {}
        self._images: OrderedDict[int, dict[str, torch.Tensor]] = OrderedDict()

    def __len__(self) -> int:
        return len(self.positions) + len(self.extra)

    def __getitem__(self, i: int) -> dict[str, Any] | None:
        if i < len(self.positions):
            position = self.positions[i]
            item = self.frames[position]
        else:
            position, component = self.extra[i - len(self.positions)]
            item = self.frames.item(position, component)
        if item is None:
            return None
        episode, row = item["episode_index"], self.frames.locate(position)[1]
        actions = self._episode_actions(episode)
        chunk = actions[row: row + self.cfg.chunk_size]
        real = len(chunk)
        # Past the episode's end the robot holds its last action: a sensible input for the expert's
        # attention, and masked out of the loss.
        padded = np.repeat(chunk[-1:], self.cfg.chunk_size, axis=0)
        padded[:real] = chunk
        mask = np.zeros(padded.shape, dtype=bool)
        mask[:real] = True
        item["actions"] = torch.from_numpy(padded)
        item["action_mask"] = torch.from_numpy(mask)
        # The state keys concatenated in their configured order (one key: its vector as it is).
        item["state"] = torch.cat([item.pop(k).reshape(-1) for k in self.cfg.state_keys])
        item.pop(self.cfg.action_key, None)
        if self.cfg.cameras:
            frames = self._episode_images(episode)
            item["images"] = {cam: frames[cam][row] for cam in self.cfg.cameras}
        return item

    def _episode_actions(self, episode: int) -> np.ndarray:
        if episode not in self._actions:
            table = self.dataset.read_episode(episode, [self.cfg.action_key])
            self._actions[episode] = feature_matrix(table, self.cfg.action_key).astype(np.float32)
        return self._actions[episode]

    def _episode_images(self, episode: int) -> dict[str, torch.Tensor]:
        cached = self._images.get(episode)
        if cached is not None:
            self._images.move_to_end(episode)
            return cached
        timestamps = [float(t) for t in self.dataset.episode_timestamps(episode)]
        frames = {}
        for cam in self.cfg.cameras:
            decoded = torch.from_numpy(np.stack(self.dataset.decode_frames(episode, cam, timestamps)))
            x = decoded.permute(0, 3, 1, 2).float()
            x = F.interpolate(x, size=(self.image_size, self.image_size), mode="bilinear", antialias=True)
            frames[cam] = x.round().clamp(0, 255).to(torch.uint8).permute(0, 2, 3, 1).contiguous()
        self._images[episode] = frames
        while len(self._images) > self.cache_episodes:
            self._images.popitem(last=False)
        logger.debug("episode %d: %d frames decoded per camera", episode, len(timestamps))
        return frames


def event_components(recipe: Recipe) -> list[str]:
    """The blend components of `recipe` whose bindings read event rows (interjection, speech)."""
    if not recipe.is_blend:
        return []
    found = []
    for name, component in recipe.components():
        names = [n for n in component.referenced_binding_names() if n != "task"]
        if any(component.binding(n).reads_events for n in names):
            found.append(name)
    return found


def _episode_of_each_frame(dataset: LeRobotDataset) -> list[int]:
    return [e.episode_index for e in dataset.episodes for _ in range(e.length)]
