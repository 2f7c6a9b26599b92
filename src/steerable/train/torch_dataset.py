"""A map-style PyTorch dataset over every frame of a LeRobot dataset, rendered through a recipe.

Each item is the frame's chat sample plus the camera frames its image blocks name and the
requested state/action features. An episode's timeline and feature arrays are built on first
use and kept in a small LRU cache; video files are opened per call, so no handle crosses a
DataLoader worker fork, and pickling (spawn workers) drops the cache.
"""

from __future__ import annotations

import bisect
import logging
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset

from steerable.dataset import LeRobotDataset
from steerable.dataset.frames import feature_matrix
from steerable.errors import ConfigError
from steerable.recipes import EpisodeTimeline, Recipe
from steerable.recipes.render import RenderOptions, render_sample
from steerable.train.images import image_features
from steerable.train.samples import TASK_FALLBACK, DatasetRenderer, Fallback

__all__ = ["DEFAULT_FEATURES", "FEATURES", "RecipeDataset"]

logger = logging.getLogger(__name__)

DEFAULT_FEATURES: tuple[str, ...] = ("observation.state", "action")
# The item key holding the requested features, by their dataset names.
FEATURES = "features"
_FRAME_COLUMNS = ("index", "frame_index", "timestamp", "task_index")


@dataclass(frozen=True)
class _Episode:
    """What items of one episode need: its timeline, frame columns and feature arrays."""

    timeline: EpisodeTimeline
    columns: dict[str, list[Any]]
    features: dict[str, np.ndarray]


class RecipeDataset(Dataset[dict[str, Any] | None]):
    """Frame `i` (global position over the dataset's episodes) rendered through `recipe`.

    An item is a dict with `index`, `episode_index`, `frame_index`, `timestamp`, `task`,
    `messages`, `message_streams`, `target_message_indices`, `images` (camera key -> uint8
    H x W x 3 tensor, for every image block; absent with `decode_images=False`) and `features`
    (each requested feature's name -> float32 tensor; absent when none is requested). Features sit
    in their own mapping, so no dataset's feature name (`index`, `task`, `actions`...) can replace
    a key of the item or of what is built on it. It is None when nothing renders and
    `fallback="none"`; `fallback="task"` gives such frames the plain-task low-level sample.
    """

    def __init__(
        self,
        dataset: LeRobotDataset,
        recipe: Recipe,
        *,
        options: RenderOptions | None = None,
        fallback: Fallback = "task",
        features: Sequence[str] | None = DEFAULT_FEATURES,
        decode_images: bool = True,
        cache_episodes: int = 8,
    ) -> None:
        self.renderer = DatasetRenderer(dataset, recipe, options=options, fallback=fallback)
        self.dataset = dataset
        self.features = tuple(features or ())
        _check_features(dataset, self.features)
        if cache_episodes < 1:
            raise ConfigError(f"cache_episodes must be at least 1, got {cache_episodes}")
        self.decode_images = decode_images
        self.cache_episodes = cache_episodes
        self._episodes = [e.episode_index for e in dataset.episodes]
        self._starts = np.cumsum([0] + [e.length for e in dataset.episodes]).tolist()
        self._cache: OrderedDict[int, _Episode] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return int(self._starts[-1])

    def __getstate__(self) -> dict[str, Any]:
        # Spawned DataLoader workers get a copy without the cache (it is rebuilt lazily) or the lock.
        state = dict(self.__dict__)
        state["_cache"] = OrderedDict()
        del state["_lock"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def locate(self, i: int) -> tuple[int, int]:
        """(episode_index, row within the episode) of global position `i`."""
        n = len(self)
        if not -n <= i < n:
            raise IndexError(f"frame position {i} is out of range for {n} frames")
        i %= n
        pos = bisect.bisect_right(self._starts, i) - 1
        return self._episodes[pos], i - int(self._starts[pos])

    def __getitem__(self, i: int) -> dict[str, Any] | None:
        return self.item(int(i))

    def item(self, i: int, component: str | None = None) -> dict[str, Any] | None:
        """Frame `i` rendered through the recipe, or through its blend `component` alone (no fallback:
        None when that component has nothing to supervise there)."""
        return self.rendered(i, component)[0]

    def rendered(self, i: int, component: str | None = None) -> tuple[dict[str, Any] | None, str]:
        """`item(i, component)` and the name of the blend component that rendered it: the drawn one
        where nothing rendered, `TASK_FALLBACK` where the plain-task sample stands in for the drawn
        one (it is not that component's sample), "" for a recipe without a blend."""
        episode_index, row = self.locate(int(i))
        ep = self._episode(episode_index)
        cols = ep.columns
        index, t = int(cols["index"][row]), float(cols["timestamp"][row])
        task = self.dataset.tasks.get(int(cols["task_index"][row]), "")
        if component is None:
            sample, fell_back, name = self.renderer.render_named(ep.timeline, t=t, index=index, task=task)
            if fell_back:
                name = TASK_FALLBACK
        else:
            name = component
            sample = render_sample(self.component_recipe(component), ep.timeline, t=t, sample_idx=index, task=task,
                                   options=self.renderer.options)
        if sample is None:
            return None, name
        item: dict[str, Any] = {
            "index": index,
            "episode_index": episode_index,
            "frame_index": int(cols["frame_index"][row]),
            "timestamp": t,
            "task": task,
            **sample.to_dict(),
        }
        if self.decode_images:
            item["images"] = {
                cam: torch.from_numpy(self.dataset.decode_frames(episode_index, cam, [t])[0])
                for cam in image_features(sample.messages)
            }
        if self.features:
            item[FEATURES] = {feature: torch.from_numpy(values[row].copy()) for feature, values in ep.features.items()}
        return item, name

    def component_recipe(self, name: str) -> Recipe:
        blend = self.renderer.recipe.blend or {}
        if name not in blend:
            raise ConfigError(f"the recipe has no blend component {name!r} (components: {sorted(blend)})")
        return blend[name]

    def event_frames(self, episode_index: int) -> list[int]:
        """Global positions of the episode's frames that carry event rows (interjections, speech)."""
        ep = self._episode(episode_index)
        start = self._starts[self._episodes.index(episode_index)]
        times = set(ep.timeline.event_times())
        return [int(start) + r for r, t in enumerate(ep.columns["timestamp"]) if float(t) in times]

    def user_texts(self, episode_index: int) -> frozenset[str]:
        """What the episode's user rows say (`EpisodeTimeline.user_texts`): a person's words, beside its task."""
        return self._episode(episode_index).timeline.user_texts()

    def _episode(self, episode_index: int) -> _Episode:
        with self._lock:
            cached = self._cache.get(episode_index)
            if cached is not None:
                self._cache.move_to_end(episode_index)
                return cached
        # Built outside the lock: two threads may build the same episode once each, which is harmless.
        timeline, table = self.renderer.timeline(episode_index)
        columns = {n: table.column(n).to_pylist() for n in _FRAME_COLUMNS}
        features: dict[str, np.ndarray] = {}
        if self.features:
            data = self.dataset.read_episode(episode_index, list(self.features))
            features = {n: feature_matrix(data, n).astype(np.float32) for n in self.features}
        built = _Episode(timeline, columns, features)
        with self._lock:
            self._cache[episode_index] = built
            self._cache.move_to_end(episode_index)
            while len(self._cache) > self.cache_episodes:
                self._cache.popitem(last=False)
        logger.debug("episode %d loaded (%d frames)", episode_index, len(columns["index"]))
        return built


def _check_features(dataset: LeRobotDataset, names: Sequence[str]) -> None:
    numeric = [k for k, v in dataset.features.items() if v.get("dtype") not in ("video", "image", "string")]
    for name in names:
        if name not in numeric:
            raise ConfigError(
                f"{dataset.root} has no numeric feature {name!r} (numeric features: {numeric}); "
                "pass features=[...] with the dataset's state/action names, or features=None"
            )
