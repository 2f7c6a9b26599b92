"""The recipe panel: the samples `steerable render` gives, at one frame or for a whole episode.

Rendering goes through `steerable.train.samples.DatasetRenderer`, the one per-frame render path of
the CLI, the export and training; nothing here renders on its own.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from typing import Any

from steerable.dataset import LeRobotDataset
from steerable.errors import SteerableError
from steerable.recipes import builtin_recipe_names, load_recipe
from steerable.train.samples import DatasetRenderer, FrameSample

__all__ = ["RecipePanel"]


def _sample_json(s: FrameSample) -> dict[str, Any]:
    out = s.to_json()
    out["component"] = s.sample.component if s.sample is not None and not s.fallback else s.component
    out["timestamp"] = s.timestamp
    return out


class RecipePanel:
    """Recipes by name (built-ins, plus any YAML files given) and their renderers for one dataset.

    A recipe that cannot bind to the dataset (e.g. it reads a camera the dataset lacks) is listed
    with its reason instead of a renderer.
    """

    def __init__(self, ds: LeRobotDataset, recipes: Sequence[str] | None = None) -> None:
        self.ds = ds
        self.names = list(recipes) if recipes else list(builtin_recipe_names())
        self._renderers: dict[str, DatasetRenderer | str] = {}
        self._lock = threading.Lock()

    def _renderer(self, name: str) -> DatasetRenderer | str:
        with self._lock:
            if name not in self._renderers:
                try:
                    self._renderers[name] = DatasetRenderer(self.ds, load_recipe(name))
                except SteerableError as exc:
                    self._renderers[name] = str(exc)
            return self._renderers[name]

    def listing(self) -> list[dict[str, Any]]:
        """Each recipe's name and, when it cannot render on this dataset, why."""
        out = []
        for name in self.names:
            r = self._renderer(name)
            out.append({"name": name, "error": r if isinstance(r, str) else None})
        return out

    def at_frame(self, name: str, episode_index: int, frame_index: int) -> dict[str, Any]:
        """The sample of recipe `name` at one frame (messages None when it renders nothing there)."""
        if name not in self.names:
            raise KeyError(name)
        r = self._renderer(name)
        if isinstance(r, str):
            return {"recipe": name, "error": r}
        sample = next(iter(r.episode_samples(episode_index, [frame_index])))
        return {"recipe": name, **_sample_json(sample)}

    def episode(self, name: str, episode_index: int) -> dict[str, Any]:
        """Every frame's sample of one episode, deduplicated: `frames[i]` indexes `samples`."""
        r = self._renderer(name)
        if isinstance(r, str):
            return {"recipe": name, "error": r}
        index: dict[str, int] = {}
        samples: list[dict[str, Any]] = []
        frames: list[int] = []
        for s in r.episode_samples(episode_index):
            body = _sample_json(s)
            for key in ("index", "frame_index", "timestamp"):
                body.pop(key, None)
            text = json.dumps(body, sort_keys=True, ensure_ascii=False)
            if text not in index:
                index[text] = len(samples)
                samples.append(body)
            frames.append(index[text])
        return {"recipe": name, "frames": frames, "samples": samples}
