"""Training items for the policy: a rendered recipe sample, the cameras, the state, an action chunk.

Built on `steerable.train.RecipeDataset` (the recipe decides streams and targets). Each item adds
the action chunk starting at its frame with a mask that is False past the episode's end (those
steps repeat the last action and never enter the loss), the last commanded motion before it, and
every configured camera at the policy's image size. An episode's frames are decoded once, resized,
and kept (small at policy resolution).

The per-episode actions and subtask timeline an item reads are `steerable.policy.episodes`'s; the
step check's counter-examples are `steerable.policy.counterexamples`'s.

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
from torch.utils.data import Dataset

from steerable.dataset import LeRobotDataset
from steerable.dataset.frames import feature_matrix
from steerable.errors import ConfigError, DatasetError
from steerable.policy.config import PolicyConfig
from steerable.policy.counterexamples import CHECK_STRIDE, moved_away
from steerable.policy.episodes import EpisodeActions, EpisodeSubtasks, episode_actions, episode_subtasks
from steerable.policy.goal import checks_from_cameras
from steerable.policy.names import SLOT_COMPONENTS, NameSlots
from steerable.policy.objects import RELATION_WIDTH, command_objects, command_relation, object_layout
from steerable.policy.processor import Normalizer
from steerable.policy.text_noise import noisy_messages
from steerable.recipes import Recipe
from steerable.train import RecipeDataset
from steerable.train.images import resized_frames
from steerable.train.torch_dataset import FEATURES

__all__ = ["PolicyDataset", "action_components", "event_components", "fit_normalizer", "split_episodes"]

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
    """Over `episodes`: state min/max; mean/std of the actions as the model predicts them (offsets from
    the chunk's first state for relative dimensions, over every step of the chunks that train), of
    the last motion, and of the objects' offsets from the end effector."""
    from steerable.policy.processor import object_offsets

    states, actions, motions, offsets = [], [], [], []
    for e in episodes:
        table = dataset.read_episode(e, [*cfg.state_keys, cfg.action_key])
        state = np.concatenate([feature_matrix(table, k) for k in cfg.state_keys], axis=1)
        acts = EpisodeActions(feature_matrix(table, cfg.action_key).astype(np.float32), cfg)
        for what, values in (("state", state), ("action", acts.actions)):
            bad = np.flatnonzero(~np.isfinite(values).all(axis=1))
            if bad.size:  # it would make every loss nan
                raise DatasetError(f"episode {e}: the {what} holds values that are not finite (nan or inf) on "
                                   f"{bad.size} frame(s), the first {int(bad[0])}: leave the episode out (--episodes)")
        states.append(state)
        for row in acts.kept.tolist():
            chunk, mask = acts.chunk(row)
            for a, s in cfg.relative_pairs:
                chunk[:, a] -= state[row, s]
            actions.append(chunk[mask[:, 0]])
            motions.append(acts.motion(row)[None])
        found = object_offsets(cfg, torch.from_numpy(state))
        if found is not None:
            offsets.append(found.numpy())
    f64 = np.float64
    return Normalizer.fit(np.concatenate(states).astype(f64), np.concatenate(actions).astype(f64),
                          np.concatenate(motions).astype(f64) if cfg.motion_dim else None,
                          np.concatenate(offsets).astype(f64) if offsets else None)


# Decoded training frames kept in memory (the tiny model's 32 px frames: about 3 KB a frame and camera,
# so 4 GiB holds over a million).
IMAGE_CACHE_BYTES = 4 << 30


def _nbytes(frames: dict[str, torch.Tensor]) -> int:
    return sum(t.element_size() * t.nelement() for t in frames.values())


class PolicyDataset(Dataset[dict[str, Any] | None]):
    """Items of `episodes` (all by default): RecipeDataset fields plus `actions`, `action_mask`, `state`
    (the `state_keys` features concatenated) and `motion`. With `component` (a blend component that
    trains actions, `action_components`), every item is rendered through it alone, on the frames
    that train actions (pause frames left out)."""

    def __init__(self, dataset: LeRobotDataset, recipe: Recipe, cfg: PolicyConfig, image_size: int,
                 episodes: Sequence[int] | None = None, cache_episodes: int | None = None, event_repeat: int = 0,
                 component: str | None = None, image_cache_bytes: int = IMAGE_CACHE_BYTES,
                 images_from: PolicyDataset | None = None, text_noise: float = 0.0) -> None:
        # The action chunks come from `episode_actions`; the items read the state features alone.
        features = tuple(cfg.state_keys)
        # Every episode's timeline stays built (`cache_episodes` None: all of them): batches draw frames
        # from all episodes at random, and rebuilding a timeline per draw was most of a training step's
        # time (8 cached of 54 episodes; 256 of 500 made a step 30x slower).
        every = len(dataset.episodes) if cache_episodes is None else cache_episodes
        self.frames = RecipeDataset(dataset, recipe, features=features, decode_images=False,
                                    cache_episodes=max(1, every))
        self.dataset = dataset
        self.cfg = cfg
        self.image_size = image_size
        wanted = set(episodes) if episodes is not None else None
        self.positions = [i for i, ep in enumerate(_episode_of_each_frame(dataset)) if wanted is None or ep in wanted]
        self.component = component
        # The text-decided components' names, canonical (steerable.policy.names), with `name_slots`.
        self.slots = NameSlots(cfg.name_slots)
        self.text_noise = text_noise  # `steerable.policy.text_noise`, training items only
        self.layout = object_layout(cfg)  # the described objects (steerable.policy.objects), None without
        self._actions: dict[int, EpisodeActions] = {}
        self._subtasks: dict[int, EpisodeSubtasks] = {}
        self._states: dict[int, np.ndarray] = {}
        # (frame position, command) items where the command is done: the done head's positives,
        # drawn with the action component's items.
        self.done_items: list[tuple[int, str]] = []
        if component is not None:
            self.frames.component_recipe(component)  # a ConfigError naming the components if unknown
            self.positions = [i for i in self.positions if self._moving(i)]
            if cfg.done_head:
                starts = np.cumsum([0] + [e.length for e in dataset.episodes]).tolist()
                for k, e in enumerate(dataset.episodes):
                    if wanted is None or e.episode_index in wanted:
                        subtasks = self._episode_subtasks(e.episode_index)
                        self.done_items += [(int(starts[k]) + r, c) for r, c in subtasks.positives()]
        # With `step_check`: each done item whose command moves one named object to another, again with
        # that object moved away from its target (`moved_away`): a command that did not take.
        # The last command of an episode is done on its final stillness (`EpisodeSubtasks.label`), not
        # in `done_items`: its first frames there are counter-examples too. One frame in CHECK_STRIDE:
        # with every frame they were a sixth of the low-level items, which train no actions.
        # From the cameras (`checks_from_cameras`) the counter-examples are each command's first frames instead,
        # as they were recorded: before it took.
        self.check_items: list[tuple[int, str]] = []
        self.check_cameras = checks_from_cameras(cfg)
        if cfg.step_check and cfg.done_head and component is not None:
            found = [(p, c) for p, c in self.done_items if not self.check_cameras and command_objects(c, self.layout)]
            for k, e in enumerate(dataset.episodes):
                if wanted is None or e.episode_index in wanted:
                    subtasks = self._episode_subtasks(e.episode_index)
                    found += [(int(starts[k]) + r, c) for r, c in subtasks.beginnings()] if self.check_cameras else [
                        (int(starts[k]) + r, c) for r, c in subtasks.final() if command_objects(c, self.layout)]
            self.check_items = found[::CHECK_STRIDE]
        # (frame position, blend component) items added on event frames.
        self.extra: list[tuple[int, str]] = []
        components = event_components(recipe) if event_repeat > 0 else []
        if components:
            chosen = [e.episode_index for e in dataset.episodes if wanted is None or e.episode_index in wanted]
            for ep in chosen:
                for pos in self.frames.event_frames(ep):
                    self.extra += [(pos, name) for name in components for _ in range(event_repeat)]
        # Decoded, resized frames are kept by size, not by episode count: a miss decodes a whole
        # episode, so a cache smaller than the episodes drawn from turns every draw into a decode.
        self.image_cache_bytes = image_cache_bytes
        # Another dataset of the same run whose frames these are (the action component's items draw the
        # blend's episodes): one decode and one cache for both, the same pixels.
        if images_from is not None and (images_from.dataset is not dataset or images_from.image_size != image_size
                                        or images_from.cfg.cameras != cfg.cameras):
            raise ValueError("images_from must read the same dataset, cameras and image size")
        self.images_from = images_from
        self._images: OrderedDict[int, dict[str, torch.Tensor]] = OrderedDict()
        self._image_bytes = 0

    def __len__(self) -> int:
        return len(self.positions) + len(self.extra) + len(self.done_items) + len(self.check_items)

    def __getitem__(self, i: int) -> dict[str, Any] | None:
        done_command = None
        first_done = len(self.positions) + len(self.extra)
        undone = i >= first_done + len(self.done_items)  # a step check's counter-example (`check_items`)
        if i < len(self.positions):
            position = self.positions[i]
            item, component = self.frames.rendered(position, self.component)
        elif i < first_done:
            position, component = self.extra[i - len(self.positions)]
            item = self.frames.item(position, component)
        else:
            component = self.component or ""
            position, done_command = (self.check_items[i - first_done - len(self.done_items)] if undone
                                      else self.done_items[i - first_done])
            item = self.frames.item(position, self.component) if self.component is not None else None
            if item is not None:
                item["messages"] = [{**m, "content": done_command} if stream == "low_level" else m
                                    for m, stream in zip(item["messages"], item["message_streams"], strict=True)]
        if item is None:
            return None
        if self.text_noise and item["target_message_indices"]:
            said = {item["task"], *self.frames.user_texts(item["episode_index"])}
            item["messages"] = noisy_messages(item["messages"], item["target_message_indices"], said,
                                              self.text_noise, np.random.default_rng((7, i)))
        if self.slots and component in SLOT_COMPONENTS:
            item["messages"], mapping = self.slots.canonical(item["messages"])
            item["task"] = self.slots.text(item["task"], mapping)
        episode, row = item["episode_index"], self.frames.locate(position)[1]
        actions = self._episode_actions(episode)
        padded, mask = actions.chunk(row)
        if done_command is not None:
            mask[:] = False  # the recorded actions belong to the next command
        item["actions"] = torch.from_numpy(padded)
        item["action_mask"] = torch.from_numpy(mask)
        # The low-level command (a done item's was put in its messages above).
        command = _low_level_command(item)
        if self.cfg.done_head:
            label = -1.0 if command is None else self._episode_subtasks(episode).label(row, command)
            item["done"] = torch.tensor(-1.0 if undone else 1.0 if done_command is not None else label)
        if self.cfg.motion_dim:
            item["motion"] = torch.from_numpy(actions.motion(row))
        # The state keys concatenated in their configured order (one key: its vector as it is). The
        # dataset's features arrive in their own mapping: a feature named like a key set here
        # (`actions`, `state`, `motion`...) cannot replace it.
        features = item.pop(FEATURES)
        item["state"] = torch.cat([features[k].reshape(-1) for k in self.cfg.state_keys])
        if undone and done_command is not None and not self.check_cameras:
            item["state"] = moved_away(item["state"], done_command, self.cfg, self.layout, np.random.default_rng(i))
        if self.cfg.step_check:
            # The check learns where a command reported done left its object: on the frames that teach
            # "done", and on their counter-examples.
            relation = None if command is None else command_relation(command, self.layout, item["state"].tolist())
            reported = undone or float(item["done"]) == 1.0  # step_check implies done_head (PolicyConfig)
            known = relation is not None or self.check_cameras
            item["check"] = torch.tensor((0.0 if undone else 1.0) if known and reported else -1.0)
            item["relation"] = torch.tensor(relation if relation is not None else [0.0] * RELATION_WIDTH)
        if self.cfg.goal_head or self.cfg.keypoints:
            # Where this command's segment ends (`EpisodeSubtasks.end_row`): the goal head's label, NaN unknown.
            end = None if command is None else self._episode_subtasks(episode).end_row(row, command)
            states = self._episode_states(episode)
            item["goal"] = (torch.from_numpy(states[min(end, len(states) - 1)]) if end is not None
                            else torch.full((states.shape[1],), float("nan")))
        if self.cfg.cameras:
            frames = self._episode_images(episode)
            item["images"] = {cam: frames[cam][row] for cam in self.cfg.cameras}
        return item

    def _moving(self, position: int) -> bool:
        episode, row = self.frames.locate(position)
        return bool(self._episode_actions(episode).rank[row] >= 0)

    def _episode_subtasks(self, episode: int) -> EpisodeSubtasks:
        if episode not in self._subtasks:
            self._subtasks[episode] = episode_subtasks(self.dataset, episode, self._episode_actions(episode))
        return self._subtasks[episode]

    def _episode_states(self, episode: int) -> np.ndarray:
        if episode not in self._states:
            table = self.dataset.read_episode(episode, list(self.cfg.state_keys))
            self._states[episode] = np.concatenate([feature_matrix(table, k) for k in self.cfg.state_keys],
                                                   axis=1).astype(np.float32)
        return self._states[episode]

    def _episode_actions(self, episode: int) -> EpisodeActions:
        if episode not in self._actions:
            self._actions[episode] = episode_actions(self.dataset, self.cfg, episode)
        return self._actions[episode]

    def _episode_images(self, episode: int) -> dict[str, torch.Tensor]:
        if self.images_from is not None:
            return self.images_from._episode_images(episode)
        cached = self._images.get(episode)
        if cached is not None:
            self._images.move_to_end(episode)
            return cached
        timestamps = [float(t) for t in self.dataset.episode_timestamps(episode)]
        frames = {cam: resized_frames(self.dataset, episode, cam, timestamps, self.image_size)
                  for cam in self.cfg.cameras}
        self._images[episode] = frames
        self._image_bytes += _nbytes(frames)
        while len(self._images) > 1 and self._image_bytes > self.image_cache_bytes:
            self._image_bytes -= _nbytes(self._images.popitem(last=False)[1])
        logger.debug("episode %d: %d frames decoded per camera", episode, len(timestamps))
        return frames


def action_components(recipe: Recipe) -> list[str]:
    """The blend components of `recipe` that train actions only (a `low_level` turn, no text target)."""
    if not recipe.is_blend:
        return []
    return [name for name, component in recipe.components()
            if any(t.stream == "low_level" for t in component.messages or ())
            and not any(t.target for t in component.messages or ())]


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


def _low_level_command(item: dict[str, Any]) -> str | None:
    """The command of a sample that trains actions only (one `low_level` turn, no target), else None."""
    if item.get("target_message_indices"):
        return None
    low = [m for m, stream in zip(item["messages"], item["message_streams"], strict=True) if stream == "low_level"]
    if len(low) != 1 or not isinstance(low[0].get("content"), str):
        return None
    return str(low[0]["content"])


def _episode_of_each_frame(dataset: LeRobotDataset) -> list[int]:
    return [e.episode_index for e in dataset.episodes for _ in range(e.length)]
