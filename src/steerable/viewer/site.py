"""The viewer's data for one dataset: the dataset summary and per-episode payloads (cached).

The server and the static export share it; they differ only in where a camera's video lives, which
the caller supplies as `video_source(camera, episode) -> (url, offset_s)` with player time =
episode time + offset.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

from steerable.dataset import EpisodeMeta, LeRobotDataset
from steerable.dataset.summary import producers_of
from steerable.errors import ConfigError, SteerableError
from steerable.viewer.episodes import episode_language, episode_list, tracks, vqa_overlays
from steerable.viewer.plot import plot_data
from steerable.viewer.renders import RecipePanel

__all__ = ["VideoSource", "ViewerData"]

VideoSource = Callable[[str, EpisodeMeta], tuple[str, float]]

_CACHE_SIZE = 32


class ViewerData:
    """Summary and episode payloads of `ds`, limited to `episodes` when given."""

    def __init__(
        self, ds: LeRobotDataset, *, episodes: Sequence[int] | None = None, recipes: Sequence[str] | None = None
    ) -> None:
        self.ds = ds
        if episodes is not None:
            known = {e.episode_index for e in ds.episodes}
            missing = sorted(set(episodes) - known)
            if missing:
                raise ConfigError(f"episode(s) {missing} are not in {ds.root}")
        self.episode_indices = sorted(set(episodes)) if episodes is not None else None
        self.recipes = RecipePanel(ds, recipes)
        self.producers = producers_of(ds)  # style -> model id or heuristic:<module>, as `steerable info` shows
        self._summary: dict[str, Any] | None = None
        self._episodes: OrderedDict[int, dict[str, Any]] = OrderedDict()
        self._lock = threading.Lock()

    def episodes(self) -> list[EpisodeMeta]:
        if self.episode_indices is None:
            return list(self.ds.episodes)
        return [self.ds.episode(i) for i in self.episode_indices]

    def summary(self) -> dict[str, Any]:
        """Dataset name, fps, cameras, recipes, who wrote each style, and the episode list (computed once)."""
        with self._lock:
            if self._summary is None:
                wanted = {e.episode_index for e in self.episodes()}
                self._summary = {
                    "name": self.ds.root.name,
                    "fps": self.ds.fps,
                    "cameras": list(self.ds.camera_keys),
                    "recipes": self.recipes.listing(),
                    "producers": self.producers,
                    "episodes": [e for e in episode_list(self.ds) if e["episode_index"] in wanted],
                }
            return self._summary

    def episode(self, episode_index: int, video_source: VideoSource) -> dict[str, Any]:
        """One episode's payload: cameras, rows, tracks, VQA overlays and the state/action plot."""
        with self._lock:
            if episode_index in self._episodes:
                self._episodes.move_to_end(episode_index)
                return self._episodes[episode_index]
        ep = self.ds.episode(episode_index)
        if self.episode_indices is not None and ep.episode_index not in self.episode_indices:
            raise ConfigError(f"episode {episode_index} is not among the episodes being viewed")
        persistent, events, stamps = episode_language(self.ds, ep)
        duration = float(stamps[-1]) + 1.0 / self.ds.fps if len(stamps) else 0.0
        cameras = []
        for key in self.ds.camera_keys:
            try:
                url, offset = video_source(key, ep)
            except SteerableError as exc:
                cameras.append({"key": key, "url": None, "offset": 0.0, "error": str(exc)})
                continue
            cameras.append({"key": key, "url": url, "offset": offset, "error": None})
        payload = {
            "episode_index": ep.episode_index,
            "task": self.ds.task_of(ep),
            "length": ep.length,
            "fps": self.ds.fps,
            "duration": duration,
            "cameras": cameras,
            "persistent": persistent,
            "events": events,
            "tracks": tracks(persistent, events, duration, self.producers),
            "vqa": vqa_overlays(events),
            "plot": plot_data(self.ds, ep, stamps, persistent),
        }
        with self._lock:
            self._episodes[ep.episode_index] = payload
            while len(self._episodes) > _CACHE_SIZE:
                self._episodes.popitem(last=False)
        return payload
