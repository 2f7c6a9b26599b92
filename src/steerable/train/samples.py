"""Render a recipe over a dataset's frames: the shared core of `render`, `export` and training.

Per episode the language columns are read once (column projection), the persistent rows are indexed
into an `EpisodeTimeline`, and each frame renders in microseconds. Nothing here needs torch.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from steerable.dataset import LeRobotDataset
from steerable.errors import ConfigError
from steerable.language.rows import Row, rows_from_arrow
from steerable.language.styles import LANGUAGE_EVENTS, LANGUAGE_PERSISTENT
from steerable.recipes import EpisodeTimeline, Recipe
from steerable.recipes.render import RenderedSample, RenderOptions, drawn_component, render_sample

__all__ = ["DatasetRenderer", "Fallback", "FrameSample", "RenderStats", "task_fallback"]

Fallback = Literal["none", "task"]


@dataclass(slots=True)
class FrameSample:
    """One frame's rendered sample; `sample` is None when the recipe renders nothing there."""

    index: int
    episode_index: int
    frame_index: int
    timestamp: float
    task: str
    sample: RenderedSample | None
    component: str
    fallback: bool = False

    def to_json(self) -> dict[str, Any]:
        s = self.sample
        return {
            "index": self.index,
            "episode_index": self.episode_index,
            "frame_index": self.frame_index,
            "messages": s.messages if s is not None else None,
            "message_streams": s.message_streams if s is not None else None,
            "target_message_indices": s.target_message_indices if s is not None else None,
        }


@dataclass
class RenderStats:
    """How often each blend component was drawn, rendered, or left the frame empty."""

    drawn: Counter[str] = field(default_factory=Counter)
    rendered: Counter[str] = field(default_factory=Counter)
    fell_back: Counter[str] = field(default_factory=Counter)
    empty: Counter[str] = field(default_factory=Counter)
    frames: int = 0

    def add(self, s: FrameSample) -> None:
        self.frames += 1
        self.drawn[s.component] += 1
        if s.fallback:
            self.fell_back[s.component] += 1
        elif s.sample is None:
            self.empty[s.component] += 1
        else:
            self.rendered[s.sample.component or s.component] += 1

    def as_dict(self) -> dict[str, Any]:
        names = sorted(set(self.drawn) | set(self.rendered))
        return {
            "frames": self.frames,
            "components": {
                n: {
                    "drawn": self.drawn[n],
                    "rendered": self.rendered[n],
                    "fell_back": self.fell_back[n],
                    "empty": self.empty[n],
                }
                for n in names
            },
        }


def task_fallback(task: str) -> RenderedSample | None:
    """The plain-task low-level sample a policy trains on when the recipe renders nothing."""
    if not task:
        return None
    return RenderedSample([{"role": "user", "content": task}], ["low_level"], [], component="fallback:task")


class DatasetRenderer:
    """Renders `recipe` on every frame of `dataset`, episode by episode."""

    def __init__(
        self,
        dataset: LeRobotDataset,
        recipe: Recipe,
        *,
        options: RenderOptions | None = None,
        fallback: Fallback = "none",
    ) -> None:
        if fallback not in ("none", "task"):
            raise ConfigError(f"fallback must be 'none' or 'task', got {fallback!r}")
        missing = sorted(k for k in recipe.camera_keys if k not in dataset.camera_keys)
        if missing:
            names = {key: name for name, key in recipe.cameras.items()}
            pairs = " ".join(f"{names.get(k, k)}=<camera>" for k in missing)
            raise ConfigError(
                f"the recipe reads camera(s) {missing} that {dataset.root} does not have "
                f"(cameras: {dataset.camera_keys}); bind them with --camera_map {pairs}"
            )
        self.dataset = dataset
        self.recipe = recipe
        self.options = options or RenderOptions()
        self.fallback = fallback
        self.stats = RenderStats()

    def timeline(self, episode_index: int) -> tuple[EpisodeTimeline, Any]:
        """The episode's indexed timeline and its frame table (index, frame_index, timestamp, task)."""
        names = self._columns()
        table = self.dataset.read_episode(episode_index, names)
        persistent: list[Row] = []
        if LANGUAGE_PERSISTENT in names and table.num_rows:
            persistent = rows_from_arrow(table.column(LANGUAGE_PERSISTENT).slice(0, 1))[0]
        events: dict[float, list[Row]] = defaultdict(list)
        if LANGUAGE_EVENTS in names:
            stamps = table.column("timestamp").to_pylist()
            for t, rows in zip(stamps, rows_from_arrow(table.column(LANGUAGE_EVENTS)), strict=True):
                if rows:
                    events[float(t)].extend(rows)
        return EpisodeTimeline(persistent, dict(events), fps=self.dataset.fps), table

    def _columns(self) -> list[str]:
        present = set(self.dataset.features)
        base = ["index", "frame_index", "timestamp", "task_index"]
        return base + [c for c in (LANGUAGE_PERSISTENT, LANGUAGE_EVENTS) if c in present]

    def episode_samples(self, episode_index: int, frames: Iterable[int] | None = None) -> Iterator[FrameSample]:
        timeline, table = self.timeline(episode_index)
        cols = {n: table.column(n).to_pylist() for n in ("index", "frame_index", "timestamp", "task_index")}
        rows = range(table.num_rows) if frames is None else _frame_rows(cols["frame_index"], frames)
        for i in rows:
            yield self._render(timeline, episode_index, cols, i)

    def render(
        self, timeline: EpisodeTimeline, *, t: float, index: int, task: str
    ) -> tuple[RenderedSample | None, bool]:
        """One frame's sample and whether it is the task fallback (no statistics kept).

        With `fallback="task"` this is the reference's training step: in `compat="lerobot"` a frame
        that carries no language rows at all gets the task sample without rendering the recipe.
        """
        if self.fallback == "task" and self.options.compat == "lerobot" and timeline.is_empty_at(t):
            fallback = task_fallback(task)
            return fallback, fallback is not None
        sample = render_sample(self.recipe, timeline, t=t, sample_idx=index, task=task, options=self.options)
        if sample is None and self.fallback == "task":
            fallback = task_fallback(task)
            return fallback, fallback is not None
        return sample, False

    def _render(self, timeline: EpisodeTimeline, episode_index: int, cols: dict[str, list[Any]], i: int) -> FrameSample:
        index = int(cols["index"][i])
        t = float(cols["timestamp"][i])
        task = self.dataset.tasks.get(int(cols["task_index"][i]), "")
        sample, fell_back = self.render(timeline, t=t, index=index, task=task)
        if sample is not None and not fell_back:
            component = sample.component
        else:
            component = drawn_component(self.recipe, index, self.options)
        out = FrameSample(index, episode_index, int(cols["frame_index"][i]), t, task, sample, component, fell_back)
        self.stats.add(out)
        return out

    def samples(self, episodes: Iterable[int] | None = None) -> Iterator[FrameSample]:
        chosen = [e.episode_index for e in self.dataset.episodes] if episodes is None else list(episodes)
        for ep in chosen:
            yield from self.episode_samples(ep)


def _frame_rows(frame_index: list[int], frames: Iterable[int]) -> list[int]:
    position = {int(f): i for i, f in enumerate(frame_index)}
    rows = []
    for f in frames:
        if int(f) not in position:
            raise ConfigError(f"frame {f} is not in the episode (frames 0..{len(frame_index) - 1})")
        rows.append(position[int(f)])
    return rows
