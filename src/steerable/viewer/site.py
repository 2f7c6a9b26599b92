"""The viewer's data for one dataset: the dataset summary and per-episode payloads (cached).

The server and the static export share it; they differ only in where a camera's video lives, which
the caller supplies as `video_source(camera, episode) -> (url, offset_s)` with player time =
episode time + offset. After a save the editor calls `invalidate`, which drops what the save changed
(the episode's payload, the summary, the review ordering; the keystates stay: the motion did not change).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

from steerable.dataset import EpisodeMeta, LeRobotDataset, open_dataset
from steerable.dataset.provenance import read_provenance
from steerable.dataset.review import human_edits, review_status, revision_changes, rows_fingerprint
from steerable.dataset.review_records import UNREVIEWED
from steerable.dataset.revisions import list_revisions, read_revision
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
        self,
        ds: LeRobotDataset,
        *,
        episodes: Sequence[int] | None = None,
        recipes: Sequence[str] | None = None,
        against: Sequence[str] = (),
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
        self.against = list(against)  # other annotations of these episodes, for the review ordering
        self._summary: dict[str, Any] | None = None
        self._episodes: OrderedDict[int, dict[str, Any]] = OrderedDict()
        self._uncertainty: list[dict[str, Any]] | None = None
        self._keystates: dict[int, list[float]] = {}
        self._lock = threading.Lock()
        self._order_lock = threading.Lock()

    def invalidate(self, episode_index: int | None = None) -> None:
        """Forget what a write changed: one episode's payload (None: all), the summary and the ordering."""
        with self._lock:
            self.producers = producers_of(self.ds)
            self._summary = None
            self._uncertainty = None
            if episode_index is None:
                self._episodes.clear()
            else:
                self._episodes.pop(episode_index, None)

    def episodes(self) -> list[EpisodeMeta]:
        if self.episode_indices is None:
            return list(self.ds.episodes)
        return [self.ds.episode(i) for i in self.episode_indices]

    def summary(self) -> dict[str, Any]:
        """Dataset name, fps, cameras, recipes, who wrote each style, and the episode list (computed once)."""
        with self._lock:
            if self._summary is None:
                wanted = {e.episode_index for e in self.episodes()}
                status = review_status(self.ds)
                edited = {e for eps in human_edits(self.ds).values() for e in eps}
                listed = [e for e in episode_list(self.ds) if e["episode_index"] in wanted]
                for e in listed:
                    e["status"] = status.get(e["episode_index"], UNREVIEWED)
                    e["human"] = e["episode_index"] in edited
                self._summary = {
                    "name": self.ds.root.name,
                    "fps": self.ds.fps,
                    "cameras": list(self.ds.camera_keys),
                    "recipes": self.recipes.listing(),
                    "producers": self.producers,
                    "episodes": listed,
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
        provenance = read_provenance(self.ds.root, self.ds.info)  # who wrote each style of this episode
        producers = provenance.episode_producers(ep.episode_index)
        heuristic = provenance.heuristic_styles(ep.episode_index)
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
            "stamps": [float(t) for t in stamps],  # every frame's stored timestamp: edits snap to them
            "version": rows_fingerprint(persistent, [(e["t"], r) for e in events for r in e["rows"]]),
            "review": {
                "status": review_status(self.ds).get(ep.episode_index, UNREVIEWED),
                "human": sorted(s for s, eps in human_edits(self.ds).items() if ep.episode_index in eps),
            },
            "producers": producers,
            "heuristic": sorted(heuristic),  # styles whose rows here a heuristic wrote, not a model or a person
            "tracks": tracks(persistent, events, duration, producers, heuristic),
            "vqa": vqa_overlays(events),
            "plot": plot_data(self.ds, ep, stamps, persistent),
        }
        with self._lock:
            self._episodes[ep.episode_index] = payload
            while len(self._episodes) > _CACHE_SIZE:
                self._episodes.popitem(last=False)
        return payload

    # -- review -----------------------------------------------------------------------------------
    def uncertainty(self) -> list[dict[str, Any]]:
        """The episodes being viewed, least certain first (`steerable.viewer.uncertainty`)."""
        from steerable.viewer.uncertainty import keystate_times, subtask_starts, uncertainty

        with self._order_lock:
            if self._uncertainty is None:
                wanted = [e.episode_index for e in self.episodes()]
                for ep in wanted:
                    if ep not in self._keystates:
                        self._keystates[ep] = keystate_times(self.ds, ep)
                others = [(name, subtask_starts(open_dataset(name))) for name in self.against]
                self._uncertainty = uncertainty(self.ds, self._keystates, against=others, episodes=wanted)
            return self._uncertainty

    def revisions(self) -> dict[str, Any]:
        """The dataset's revisions, newest first."""
        return {"revisions": [r.to_json() for r in reversed(list_revisions(self.ds.root))]}

    def revision(self, rev: int) -> dict[str, Any]:
        """One revision and what it changed, per episode and style."""
        return {**read_revision(self.ds.root, rev).to_json(), "changes": revision_changes(self.ds.root, rev)}
