"""Render a recipe over a dataset's frames: the shared core of `render`, `export` and training.

Per episode the language columns are read once (column projection), the persistent rows are indexed
into an `EpisodeTimeline`, and each frame renders in microseconds. Nothing here needs torch.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from steerable.dataset import LeRobotDataset
from steerable.errors import ConfigError
from steerable.language.rows import (
    EventRow,
    PersistentRow,
    Row,
    event_rows_from_arrow,
    persistent_rows_from_arrow,
)
from steerable.language.styles import LANGUAGE_EVENTS, LANGUAGE_PERSISTENT
from steerable.recipes import EpisodeTimeline, Recipe
from steerable.recipes.render import FrameRenderer, RenderedSample, RenderOptions, drawn_component

__all__ = [
    "TASK_FALLBACK", "DatasetRenderer", "Fallback", "FrameSample", "LeaveOut", "RenderStats", "episode_timeline",
    "task_fallback",
]

Fallback = Literal["none", "task"]
# episode -> the styles whose rows of it are not rendered (style-less tool-call rows: "tool_call"),
# e.g. `steerable.dataset.provenance.Provenance.heuristic_styles`.
LeaveOut = Callable[[int], Collection[str]]
_FRAME_COLUMNS = ("index", "frame_index", "timestamp", "task_index")


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


class RenderStats:
    """How often each blend component was drawn, rendered, or left the frame empty."""

    __slots__ = ("_counts", "frames")

    def __init__(self) -> None:
        self.frames = 0
        # (drawn component, outcome, component that rendered): one dict update per frame
        self._counts: dict[tuple[str, str, str], int] = {}

    def add(self, s: FrameSample) -> None:
        self.frames += 1
        if s.fallback:
            key = (s.component, "fell_back", "")
        elif s.sample is None:
            key = (s.component, "empty", "")
        else:
            key = (s.component, "rendered", s.sample.component or s.component)
        self._counts[key] = self._counts.get(key, 0) + 1

    def _counter(self, outcome: str | None) -> Counter[str]:
        out: Counter[str] = Counter()
        for (drawn, kind, rendered), n in self._counts.items():
            if outcome is None:
                out[drawn] += n
            elif kind == outcome:
                out[rendered or drawn] += n
        return out

    @property
    def drawn(self) -> Counter[str]:
        return self._counter(None)

    @property
    def rendered(self) -> Counter[str]:
        return self._counter("rendered")

    @property
    def fell_back(self) -> Counter[str]:
        return self._counter("fell_back")

    @property
    def empty(self) -> Counter[str]:
        return self._counter("empty")

    def as_dict(self) -> dict[str, Any]:
        drawn, rendered, fell_back, empty = self.drawn, self.rendered, self.fell_back, self.empty
        names = sorted(set(drawn) | set(rendered))
        return {
            "frames": self.frames,
            "components": {
                n: {"drawn": drawn[n], "rendered": rendered[n], "fell_back": fell_back[n], "empty": empty[n]}
                for n in names
            },
        }


# The name `RecipeDataset.rendered` gives a frame whose sample is the plain-task fallback (no blend
# component is called this: it is not an identifier).
TASK_FALLBACK = "(task fallback)"


def task_fallback(task: str) -> RenderedSample | None:
    """The plain-task low-level sample a policy trains on when the recipe renders nothing."""
    if not task:
        return None
    return RenderedSample([{"role": "user", "content": task}], ["low_level"], [], component="fallback:task")


class DatasetRenderer:
    """Renders `recipe` on every frame of `dataset`, episode by episode.

    `leave_out` names, per episode, styles whose rows are removed before rendering (as if the episode
    had none), of the styles the recipe reads; `left_out` then records, per episode, the styles it
    removed rows of.
    """

    def __init__(
        self,
        dataset: LeRobotDataset,
        recipe: Recipe,
        *,
        options: RenderOptions | None = None,
        fallback: Fallback = "none",
        leave_out: LeaveOut | None = None,
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
        self.leave_out = leave_out
        self.left_out: dict[int, list[str]] = {}
        self._reads = _styles_read(recipe)

    def timeline(self, episode_index: int) -> tuple[EpisodeTimeline, Any]:
        """The episode's indexed timeline and its frame table (index, frame_index, timestamp, task)."""
        present = set(self.dataset.features)
        names = [*_FRAME_COLUMNS, *([LANGUAGE_EVENTS] if LANGUAGE_EVENTS in present else [])]
        table = self.dataset.read_episode(episode_index, names)
        persistent: list[PersistentRow] = []
        if LANGUAGE_PERSISTENT in present and table.num_rows:
            # The list is the same on every frame: one row of it is read, not one copy per frame.
            head = self.dataset.read_episode_head(episode_index, [LANGUAGE_PERSISTENT])
            persistent = persistent_rows_from_arrow(head.column(LANGUAGE_PERSISTENT))[0]
        events = event_rows_from_arrow(table.column(LANGUAGE_EVENTS)) if LANGUAGE_EVENTS in names else []
        if self.leave_out is not None:
            persistent, events = self._without(episode_index, persistent, events)
        timeline = episode_timeline(persistent, table.column("timestamp").to_pylist(),
                                    table.column("index").to_pylist(), events, fps=self.dataset.fps)
        return timeline, table

    def _without(self, episode_index: int, persistent: list[PersistentRow],
                 events: list[list[EventRow]]) -> tuple[list[PersistentRow], list[list[EventRow]]]:
        """The episode's rows less those of the styles `leave_out` names for it (and the recipe reads)."""
        assert self.leave_out is not None
        drop = set(self.leave_out(episode_index)) & self._reads
        if not drop:
            return persistent, events
        present = {_style(r) for r in persistent} | {_style(r) for rows in events for r in rows}
        if present & drop:
            self.left_out[episode_index] = sorted(present & drop)
        return [r for r in persistent if _style(r) not in drop], [[r for r in rows if _style(r) not in drop]
                                                                 for rows in events]

    def episode_samples(self, episode_index: int, frames: Iterable[int] | None = None) -> Iterator[FrameSample]:
        timeline, table = self.timeline(episode_index)
        indices, frame_indices, stamps, task_indices = (table.column(n).to_pylist() for n in _FRAME_COLUMNS)
        rows = range(table.num_rows) if frames is None else _frame_rows(frame_indices, frames)
        tasks, add = self.dataset.tasks, self.stats.add
        renderer = FrameRenderer(self.recipe, timeline, self.options)  # one per episode: set up once
        for i in rows:
            index, t = int(indices[i]), float(stamps[i])
            task = tasks.get(int(task_indices[i]), "")
            sample, fell_back, component = self._render(renderer, t, index, task)
            out = FrameSample(index, episode_index, int(frame_indices[i]), t, task, sample, component, fell_back)
            add(out)
            yield out

    def render(
        self, timeline: EpisodeTimeline, *, t: float, index: int, task: str
    ) -> tuple[RenderedSample | None, bool]:
        """One frame's sample and whether it is the task fallback (no statistics kept).

        With `fallback="task"` this is the reference's training step: in `compat="lerobot"` a frame
        that carries no language rows at all gets the task sample without rendering the recipe.
        """
        sample, fell_back, _ = self.render_named(timeline, t=t, index=index, task=task)
        return sample, fell_back

    def render_named(
        self, timeline: EpisodeTimeline, *, t: float, index: int, task: str
    ) -> tuple[RenderedSample | None, bool, str]:
        """`render`, and the blend component the frame's sample is counted under."""
        renderer = FrameRenderer(self.recipe, timeline, self.options)
        return self._render(renderer, float(t), int(index), task)

    def _render(self, renderer: FrameRenderer, t: float, index: int,
                task: str) -> tuple[RenderedSample | None, bool, str]:
        """The sample, whether it is the task fallback, and the component it is counted under."""
        if self.fallback == "task" and self.options.compat == "lerobot" and renderer.timeline.is_empty_at(t, index):
            fallback = task_fallback(task)
            return fallback, fallback is not None, drawn_component(self.recipe, index, self.options)
        sample, component = renderer.render(t, index, task)
        if sample is None and self.fallback == "task":
            fallback = task_fallback(task)
            return fallback, fallback is not None, component
        return sample, False, component

    def samples(self, episodes: Iterable[int] | None = None) -> Iterator[FrameSample]:
        chosen = [e.episode_index for e in self.dataset.episodes] if episodes is None else list(episodes)
        for ep in chosen:
            yield from self.episode_samples(ep)


def _style(row: Row) -> str:
    return str(row.get("style") or "tool_call")


def _styles_read(recipe: Recipe) -> frozenset[str]:
    """The styles a recipe's bindings read (`${task}` reads the task_aug rephrasings; a style-less
    binding, tool-call rows: "tool_call"), declared bindings included."""
    out: set[str] = set()
    for _, component in recipe.components():
        for name in component.referenced_binding_names() | set(component.bindings):
            out.add("task_aug" if name == "task" else component.binding(name).style or "tool_call")
    return frozenset(out)


def episode_timeline(persistent: Sequence[PersistentRow], timestamps: Sequence[float], indices: Sequence[int],
                     events: Sequence[Sequence[EventRow]], *, fps: float | None) -> EpisodeTimeline:
    """An episode's timeline from its columns: the persistent list and each frame's event rows.

    Events are held per frame (by dataset `index`), so frames that share a timestamp keep their own
    rows, as the reference reads them: a frame never sees the events of its neighbour.
    """
    by_time: dict[float, list[EventRow]] = defaultdict(list)
    by_index: dict[int, Sequence[EventRow]] = {}
    for t, index, rows in zip(timestamps, indices, events, strict=False):
        if rows:
            by_time[float(t)].extend(rows)
            by_index[int(index)] = rows
    return EpisodeTimeline(persistent, dict(by_time), fps=fps, events_by_index=by_index)


def _frame_rows(frame_index: list[int], frames: Iterable[int]) -> list[int]:
    position = {int(f): i for i, f in enumerate(frame_index)}
    rows = []
    for f in frames:
        if int(f) not in position:
            raise ConfigError(f"frame {f} is not in the episode (frames 0..{len(frame_index) - 1})")
        rows.append(position[int(f)])
    return rows
