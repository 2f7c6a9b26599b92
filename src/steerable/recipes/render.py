"""Render one frame of an episode into a chat sample through a recipe.

The recipe is compiled once per option set (templates split, bindings looked up, blend weights
accumulated); per frame only the chosen component's bindings are resolved, each at most once, on
the episode's indexed timeline. Where the reference has a known problem, the default here is the
behaviour a user wants and `RenderOptions` keeps the reference behaviour (`compat="lerobot"`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from steerable.errors import ConfigError, RecipeError
from steerable.recipes.blend import WeightedChoice, rephrasing_index
from steerable.recipes.expressions import ResolverCall, Template
from steerable.recipes.model import Recipe
from steerable.recipes.resolvers import EpisodeTimeline, normalize_rows

__all__ = ["FrameRenderer", "RenderOptions", "RenderedSample", "drawn_component", "render_sample",
           "render_sample_reference"]

Compat = Literal["steerable", "lerobot"]
TaskSource = Literal["rephrasing", "dataset"]
VqaRouting = Literal["exclusive", "reference"]
EmittedAtMatch = Literal["frame", "tolerance"]
EmptyTarget = Literal["skip", "keep"]
ToolCallText = Literal["decode", "skip"]
_TASK = -1  # the slot of `${task}`, which is not a resolver call
_UNSET = object()


@dataclass(frozen=True)
class RenderOptions:
    """How rendering treats the reference's known problems; `compat="lerobot"` selects all reference ones.

    task_source: "rephrasing" rotates `${task}` over task_aug rows even when the dataset task is
        known; "dataset" lets the dataset task win (reference).
    vqa_routing: "exclusive" draws `route: vqa` components only through routing, so frames without
        VQA draw among the other components, renormalised; "reference" keeps them in the weighted
        draw, where they render None on frames without VQA.
    emitted_at_match: "frame" matches a persistent row to the one frame nearest its timestamp (when
        the timeline knows its fps); "tolerance" uses the reference's ±0.1 s window.
    empty_target: "skip" drops a target turn that renders no text and no tool calls (an unguarded
        `${subtask}` on a frame without subtask rows), as if it had `if_present`; "keep" emits it
        with empty text (reference), which trains the model to answer nothing.
    tool_call_text: "decode" reads tool calls that arrive as JSON text (raw Arrow `json` values)
        as the dicts they encode; "skip" ignores them as the reference's `tool_name=` matcher does,
        so `speech` is None on such rows (and the `say` target is lost).
    """

    compat: Compat = "steerable"
    task_source: TaskSource = "rephrasing"
    vqa_routing: VqaRouting = "exclusive"
    emitted_at_match: EmittedAtMatch = "frame"
    empty_target: EmptyTarget = "skip"
    tool_call_text: ToolCallText = "decode"

    def __post_init__(self) -> None:
        for name, kind in (("compat", Compat), ("task_source", TaskSource), ("vqa_routing", VqaRouting),
                           ("emitted_at_match", EmittedAtMatch), ("empty_target", EmptyTarget),
                           ("tool_call_text", ToolCallText)):
            if getattr(self, name) not in get_args(kind):
                raise ConfigError(f"RenderOptions.{name}={getattr(self, name)!r}; choose one of {get_args(kind)}")
        if self.compat == "lerobot":
            object.__setattr__(self, "task_source", "dataset")
            object.__setattr__(self, "vqa_routing", "reference")
            object.__setattr__(self, "emitted_at_match", "tolerance")
            object.__setattr__(self, "empty_target", "keep")
            object.__setattr__(self, "tool_call_text", "skip")


@dataclass(slots=True)  # not frozen: a frozen dataclass costs microseconds per sample to build
class RenderedSample:
    """Chat messages of one frame, the stream of each, and which messages are text targets."""

    messages: list[dict[str, Any]]
    message_streams: list[str]
    target_message_indices: list[int]
    component: str = field(default="", compare=False)

    def to_dict(self) -> dict[str, Any]:
        """The reference's sample dict: messages, message_streams, target_message_indices."""
        return {
            "messages": self.messages,
            "message_streams": self.message_streams,
            "target_message_indices": self.target_message_indices,
        }


class _Component:
    """A message recipe compiled for rendering; bindings point at slots of the plan's call table."""

    __slots__ = ("may_fail", "name", "needs_events", "resolve", "turns", "weight")

    def __init__(self, name: str, recipe: Recipe, with_declared: bool, slots: dict[ResolverCall, int]) -> None:
        self.name = name
        self.weight = recipe.weight or 0.0
        names = set(recipe.referenced_binding_names())
        if with_declared:  # the reference resolves every declared binding, used or not
            names |= set(recipe.bindings)
        resolve = []
        for n in sorted(names):
            site = recipe.binding_sites.get(n, f"{recipe.origin}: binding {n!r}")
            resolve.append((n, _TASK if n == "task" else slots.setdefault(recipe.binding(n), len(slots)), site))
        self.resolve: tuple[tuple[str, int, str], ...] = tuple(resolve)
        self.turns = tuple(
            (t.role, str(t.stream), t.target, t.if_present, t.if_absent, t.tool_calls_from, t.compiled)
            for t in recipe.messages or ()
        )
        # True when every supervised turn is guarded by an event binding: such a component renders
        # None on the (many) frames without events, which is known before resolving anything.
        supervised = [t for t in recipe.messages or () if t.target or t.stream == "low_level"]
        self.needs_events = bool(supervised) and all(
            t.if_present is not None and t.if_present != "task" and recipe.binding(t.if_present).reads_events
            for t in supervised
        )
        # ...but the reference resolves its bindings there all the same, and an ambiguous one (an
        # active_at or persistent emitted_at tie) fails: these are still resolved on such frames.
        self.may_fail = tuple((slot, site) for n, slot, site in resolve if slot != _TASK and not (
            recipe.binding(n).reads_events or recipe.binding(n).resolver in ("nth_prev", "nth_next")))


class _Plan:
    """The compiled recipe: components, the VQA-routed ones, the weighted draw, and the distinct calls."""

    __slots__ = ("calls", "choice", "drawn", "routed")

    def __init__(self, recipe: Recipe, options: RenderOptions) -> None:
        slots: dict[ResolverCall, int] = {}
        compiled = [
            (c.route == "vqa", _Component(n, c, options.compat == "lerobot", slots)) for n, c in recipe.components()
        ]
        self.calls = tuple(slots)  # dicts keep insertion order, so position == slot
        self.routed = tuple(c for routed, c in compiled if routed) if recipe.is_blend else ()
        exclusive = options.vqa_routing == "exclusive"
        self.drawn = tuple(c for routed, c in compiled if not (routed and exclusive))
        self.choice = WeightedChoice([c.weight for c in self.drawn]) if recipe.is_blend and self.drawn else None


def _plan(recipe: Recipe, options: RenderOptions) -> _Plan:
    key = (options.compat, options.vqa_routing)
    plan = recipe.render_cache.get(key)
    if plan is None:
        plan = recipe.render_cache[key] = _Plan(recipe, options)
    return plan


class _Frame:
    """One frame's inputs plus the values resolved so far (each distinct call resolved at most once).

    Built once per (plan, timeline, options) and moved from frame to frame with `at`."""

    __slots__ = ("calls", "context_task", "decode_calls", "events", "frame_exact", "memo", "sample_idx",
                 "skip_empty_targets", "t", "task", "task_first", "timeline")

    def __init__(self, plan: _Plan, timeline: EpisodeTimeline, context_task: str | None,
                 options: RenderOptions) -> None:
        self.calls = plan.calls
        self.memo: list[Any] = []
        self.timeline = timeline
        self.t = 0.0
        self.events: Sequence[Any] = ()
        self.sample_idx = 0
        self.task: str | None = None
        self.context_task = context_task
        self.task_first = options.task_source == "dataset"
        self.frame_exact = options.emitted_at_match == "frame"
        self.skip_empty_targets = options.empty_target == "skip"
        self.decode_calls = options.tool_call_text == "decode"

    def at(self, t: float, events: Sequence[Any], sample_idx: int, task: str | None) -> _Frame:
        self.t, self.events, self.sample_idx, self.task = t, events, sample_idx, task
        self.memo = [_UNSET] * len(self.calls)
        return self

    def value(self, slot: int, site: str) -> Any:
        if slot == _TASK:
            return self.resolve_task()
        value = self.memo[slot]
        if value is _UNSET:
            try:
                value = self.timeline.resolve(self.calls[slot], self.t, self.events, frame_exact=self.frame_exact,
                                              decode_calls=self.decode_calls)
            except RecipeError as exc:
                raise RecipeError(f"{site}: {exc}") from None
            self.memo[slot] = value
        return value

    def resolve_task(self) -> str | None:
        if self.task_first and self.task is not None:
            return self.task
        rephrasings = self.timeline.task_rephrasings
        if rephrasings:
            content = rephrasings[rephrasing_index(self.sample_idx, len(rephrasings))].get("content")
            if content:
                return str(content)
        return self.task if self.task is not None else self.context_task


def _copy_json(value: Any) -> Any:
    """A deep copy of JSON-like data (much faster than copy.deepcopy on small tool-call lists)."""
    if isinstance(value, dict):
        return {k: _copy_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy_json(v) for v in value]
    return value


def _render_component(component: _Component, frame: _Frame) -> RenderedSample | None:
    if component.needs_events and not frame.events:
        for slot, site in component.may_fail:
            frame.value(slot, site)
        return None
    values = {}
    memo = frame.memo
    for name, slot, site in component.resolve:
        value = memo[slot] if slot >= 0 else _UNSET
        values[name] = frame.value(slot, site) if value is _UNSET else value
    messages: list[dict[str, Any]] = []
    streams: list[str] = []
    targets: list[int] = []
    for role, stream, target, if_present, if_absent, tool_calls_from, compiled in component.turns:
        if if_present is not None and values.get(if_present) is None:
            continue
        if if_absent is not None and values.get(if_absent) is not None:
            continue
        message: dict[str, Any] = {"role": role}
        if isinstance(compiled, Template):
            message["content"] = compiled.render(values)
        elif compiled is not None:
            message["content"] = [
                {key: tpl.render(values) if tpl is not None else _copy_json(raw) for key, tpl, raw in block}
                for block in compiled
            ]
        if tool_calls_from is not None:
            source = values.get(tool_calls_from)
            if isinstance(source, dict) and source.get("tool_calls"):
                message["tool_calls"] = _copy_json(source["tool_calls"])
        if target and frame.skip_empty_targets and _is_empty(message):
            continue
        if target:
            targets.append(len(messages))
        messages.append(message)
        streams.append(stream)
    if not targets and "low_level" not in streams:
        return None
    return RenderedSample(messages, streams, targets, component.name)


def _is_empty(message: dict[str, Any]) -> bool:
    """True when a message has no tool calls and no text (string content or text blocks all blank)."""
    if message.get("tool_calls"):
        return False
    content = message.get("content")
    if isinstance(content, list):
        return not any(
            isinstance(b, dict) and (b.get("type") != "text" or str(b.get("text") or "").strip()) for b in content
        )
    return not (content or "").strip()


class FrameRenderer:
    """Renders frames of one episode's timeline: the compiled recipe and the options are looked up
    once, not per frame. Not thread-safe (it reuses one frame state); use one per thread."""

    __slots__ = ("_frame", "_plan", "timeline")

    def __init__(self, recipe: Recipe, timeline: EpisodeTimeline,
                 options: RenderOptions = RenderOptions(),  # noqa: B008  # frozen: sharing it is safe
                 *, context_task: str | None = None) -> None:
        self._plan = _plan(recipe, options)
        self._frame = _Frame(self._plan, timeline, context_task, options)
        self.timeline = timeline

    def render(self, t: float, sample_idx: int, task: str | None = None,
               frame_events: Sequence[Any] | None = None) -> tuple[RenderedSample | None, str]:
        """The frame's sample (None when the drawn component has nothing to supervise) and the name
        of the component that rendered it or, where nothing rendered, of the one the draw picked.

        `frame_events` defaults to the timeline's events of this frame (by `sample_idx` where the
        timeline holds them per frame, else by `t`).
        """
        events = self.timeline.frame_events(t, sample_idx) if frame_events is None else frame_events
        return _render(self._plan, self._frame.at(t, events, sample_idx, task))


def _render(plan: _Plan, frame: _Frame) -> tuple[RenderedSample | None, str]:
    if plan.routed:
        hits = [(c, out) for c in plan.routed if (out := _render_component(c, frame)) is not None]
        if len(hits) > 1:
            hits = [hits[WeightedChoice([c.weight for c, _ in hits], salt="vqa:").pick(frame.sample_idx)]]
        if hits:
            return hits[0][1], hits[0][0].name
    if not plan.drawn:
        return None, ""
    component = plan.drawn[0 if plan.choice is None else plan.choice.pick(frame.sample_idx)]
    return _render_component(component, frame), component.name


def render_sample(
    recipe: Recipe,
    timeline: EpisodeTimeline,
    *,
    t: float,
    sample_idx: int,
    frame_events: Sequence[Any] | None = None,
    task: str | None = None,
    options: RenderOptions = RenderOptions(),  # noqa: B008  # frozen, so sharing the default is safe
) -> RenderedSample | None:
    """Render the frame at time `t`, or None when the drawn component has nothing to supervise.

    `sample_idx` (the dataset's global `index`) drives every deterministic choice; `frame_events`
    defaults to the timeline's events of this frame (by `sample_idx` where the timeline holds them
    per frame, else by `t`); `task` is the dataset task of the frame. For many frames of one
    episode, a FrameRenderer skips the per-call set-up.

    Raises:
        RecipeError: a binding matches several rows on this frame (the message names the binding).
    """
    plan = recipe.render_cache.get((options.compat, options.vqa_routing)) or _plan(recipe, options)
    t, sample_idx = float(t), int(sample_idx)
    events = timeline.frame_events(t, sample_idx) if frame_events is None else frame_events
    return _render(plan, _Frame(plan, timeline, None, options).at(t, events, sample_idx, task))[0]


def render_sample_reference(
    recipe: Recipe,
    *,
    persistent: Iterable[Any] | None,
    events: Iterable[Any] | None,
    t: float,
    sample_idx: int,
    task: str | None = None,
    dataset_ctx: Any = None,
    options: RenderOptions = RenderOptions(),  # noqa: B008
) -> RenderedSample | None:
    """`render_sample` with the reference's call shape: raw row lists and an optional `dataset_ctx`.

    It builds a timeline on every call; for many frames of one episode build an EpisodeTimeline once.
    Pass `options=RenderOptions(compat="lerobot")` for the reference's behaviour.
    """
    context_task = dataset_ctx.get("task") if isinstance(dataset_ctx, Mapping) else getattr(dataset_ctx, "task", None)
    renderer = FrameRenderer(recipe, EpisodeTimeline(persistent), options, context_task=context_task)
    return renderer.render(float(t), int(sample_idx), task, normalize_rows(events))[0]


def drawn_component(recipe: Recipe, sample_idx: int, options: RenderOptions = RenderOptions()) -> str:  # noqa: B008
    """The component the weighted draw picks for `sample_idx` (routing aside): for per-component stats."""
    plan = recipe.render_cache.get((options.compat, options.vqa_routing)) or _plan(recipe, options)
    if plan.choice is None:
        return plan.drawn[0].name if plan.drawn else ""
    return plan.drawn[plan.choice.pick(int(sample_idx))].name
