"""Prompts for a live context, rendered by a recipe: what a model trained on the recipe saw before
the turn it is asked to write. The one definition of every prompt the runtime asks (a trained
policy's high and low level, a VLM planner); nobody writes a prompt by hand.

Each question the runtime asks is answered by the recipe component that trains it, found by what
its target writes and what its prompt reads, never by the component's name:

| question | the target writes | the prompt reads |
|---|---|---|
| `plan` | the plan | no subtask |
| `plan_update` | the plan | a subtask (the step just finished) |
| `subtask` | the subtask | the plan or the memory |
| `progress` | the subtask | neither: the step is read from the observation |
| `memory` | the memory | |
| `interjection` | a `say` call (and the revised plan, where the recipe trains one) | |
| `vqa` | a `vqa` answer | |
| `action` | nothing: low-level turns that read the active subtask alone (the command) | |

The component is rendered on a timeline built from the live context, as training rendered its
frames: the context's subtask, plan and memory were emitted before "now"; what the question writes
is emitted now (a placeholder, so nothing of it can reach the prompt unseen); after a finished step
(`memory`, `plan_update`) that step stands before now and a new one starts now; an interjection or a
question is the frame's event. The prompt is the messages before the target turn (all of them for
`action`). A recipe without a component for a question cannot ask it (`has`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, get_args

from steerable.control import LanguageContext
from steerable.errors import ConfigError
from steerable.language import speech_row
from steerable.language.styles import CONTEXT_STYLES
from steerable.recipes.loading import parse_recipe
from steerable.recipes.model import MessageTurn, Recipe
from steerable.recipes.render import RenderOptions, render_sample
from steerable.recipes.resolvers import EpisodeTimeline

__all__ = ["QUESTIONS", "LivePrompt", "LivePrompts", "Question"]

Question = Literal["plan", "plan_update", "subtask", "progress", "memory", "interjection", "vqa", "action"]
QUESTIONS: tuple[Question, ...] = get_args(Question)
_BEFORE, _NOW = 0.0, 1.0  # the live context's time, and the frame the question is asked on
_PLACEHOLDER = "\x00target\x00"
# The live task is the task (no rephrasing); components are rendered one by one, so a `route: vqa`
# component must be drawable on its own.
_OPTIONS = RenderOptions(task_source="dataset", vqa_routing="reference")
# Asked after a step is finished: that step (the context's subtask) stands before now.
_AFTER_A_STEP = frozenset({"memory", "plan_update"})


@dataclass(frozen=True)
class LivePrompt:
    """A rendered prompt and the blend component that rendered it ("" for a message recipe)."""

    messages: list[dict[str, Any]]
    component: str


@dataclass(frozen=True)
class _Answerer:
    name: str
    recipe: Recipe
    camera: str | None  # the camera a `vqa` component asks about
    writes: frozenset[str]  # the context styles its target writes (emitted now)


def _assistant_styles(recipe: Recipe, names: frozenset[str], resolver: str | None = None) -> set[str]:
    """The styles of the assistant-written rows that the bindings `names` read (`resolver`: only those)."""
    calls = [recipe.binding(n) for n in names if n != "task"]
    return {str(c.style) for c in calls if c.style is not None and c.role in (None, "assistant")
            and (resolver is None or c.resolver == resolver)}


def _reads(turns: tuple[MessageTurn, ...]) -> frozenset[str]:
    return frozenset().union(*(t.value_bindings for t in turns))


def _question_of(name: str, recipe: Recipe) -> tuple[Question, _Answerer] | None:
    """Which question the component `name` answers (see the module's table), if any."""
    turns = tuple(recipe.messages or ())
    at = next((i for i, t in enumerate(turns) if t.target), None)
    if at is None:
        reads = _reads(turns)
        calls = [recipe.binding(n) for n in reads if n != "task"]
        commanded = bool(calls) and "task" not in reads and all(
            c.resolver == "active_at" and c.style == "subtask" for c in calls)
        if commanded and any(t.stream == "low_level" for t in turns):
            return "action", _Answerer(name, recipe, None, frozenset())
        return None
    target = turns[at]
    if target.stream != "high_level" or not any(t.stream == "high_level" for t in turns[:at]):
        return None  # a joint sample (text and actions in one), which the runtime never asks
    read = _assistant_styles(recipe, _reads(turns[:at]))
    writes = frozenset(_assistant_styles(recipe, target.value_bindings, "active_at") & set(CONTEXT_STYLES))
    written = _assistant_styles(recipe, target.value_bindings)
    answerer = _Answerer(name, recipe, None, writes)
    if target.tool_calls_from is not None and recipe.binding(target.tool_calls_from).tool_name == "say":
        return "interjection", answerer
    if "memory" in written:
        return "memory", answerer
    if "plan" in written:
        return ("plan_update" if "subtask" in read else "plan"), answerer
    if "subtask" in written:
        return ("subtask" if read & {"plan", "memory"} else "progress"), answerer
    if "vqa" in written:
        camera = next((recipe.binding(n).camera for n in sorted(target.value_bindings) if n != "task"
                       and recipe.binding(n).style == "vqa"), None)
        return "vqa", _Answerer(name, recipe, camera, writes)
    return None


class LivePrompts:
    """The questions a recipe trains, each rendered from a live context (`render`)."""

    def __init__(self, recipe: Recipe, *, origin: str = "") -> None:
        self.recipe = recipe
        self.origin = origin or recipe.origin
        self.answerers: dict[Question, list[_Answerer]] = {}
        for name, component in recipe.components():
            found = _question_of(name, component)
            if found is not None:
                self.answerers.setdefault(found[0], []).append(found[1])

    @classmethod
    def from_text(cls, text: str, *, origin: str = "<recipe>") -> LivePrompts:
        """The prompts of recipe YAML `text` (a checkpoint's `recipe.yaml`); a bad recipe is a RecipeError."""
        return cls(parse_recipe(text, origin=origin), origin=origin)

    def has(self, question: Question) -> bool:
        return question in self.answerers

    def render(
        self,
        question: Question,
        context: LanguageContext,
        *,
        images: Mapping[str, Any] | None = None,
        user_text: str | None = None,
        finished: str | None = None,
        upcoming: str | None = None,
    ) -> LivePrompt:
        """The prompt of `question` for `context`.

        `images`: camera key -> frame, put into the prompt's image blocks (and which camera a `vqa`
        question is asked about). `user_text`: the interjection, or the question about the scene.
        `finished`: the step just finished (`memory`, `plan_update`; default: the context's subtask).
        `upcoming`: the step that starts now, where it is known (`memory`). For `action` the command
        is the context's subtask.
        """
        answerers = self.answerers.get(question)
        if not answerers:
            raise ConfigError(f"the recipe {self.origin} has no component that trains the {question!r} question")
        images = dict(images or {})
        answerer = next((a for a in answerers if a.camera is None or a.camera in images), answerers[0])
        now = set(answerer.writes)
        values: dict[str, str | None] = {"subtask": context.subtask, "plan": context.plan, "memory": context.memory}
        if question in _AFTER_A_STEP:
            values["subtask"] = finished if finished is not None else context.subtask
            now.discard("subtask")
        rows = [_row(style, value, _BEFORE) for style in CONTEXT_STYLES if (value := values[style])]
        if question in _AFTER_A_STEP:
            rows.append(_row("subtask", upcoming or _PLACEHOLDER, _NOW))
        rows += [_row(style, _PLACEHOLDER, _NOW) for style in CONTEXT_STYLES if style in now]
        events: list[Mapping[str, object]] = []  # rows as the renderer reads them (typed or plain)
        if question == "interjection":
            events = [{"role": "user", "content": user_text or "", "style": "interjection", "camera": None},
                      speech_row(_PLACEHOLDER)]
        elif question == "vqa":
            events = [{"role": "user", "content": user_text or "", "style": "vqa", "camera": answerer.camera},
                      {"role": "assistant", "content": _PLACEHOLDER, "style": "vqa", "camera": answerer.camera}]
        sample = render_sample(answerer.recipe, EpisodeTimeline(rows), t=_NOW, sample_idx=0, frame_events=events,
                               task=context.task, options=_OPTIONS)
        what = f"recipe component {answerer.name or self.origin!r}"
        if sample is None or (question != "action" and not sample.target_message_indices):
            raise ConfigError(f"{what} renders no {question!r} prompt for this context")
        messages = sample.messages if question == "action" else sample.messages[: sample.target_message_indices[0]]
        if _holds_placeholder(messages):
            raise ConfigError(f"{what} reads in its prompt what its {question!r} answer writes; "
                              "the runtime does not know that yet")
        return LivePrompt([_with_images(m, images) for m in messages], answerer.name)


def _row(style: str, content: str, at: float) -> dict[str, Any]:
    return {"role": "assistant", "content": content, "style": style, "timestamp": at}


def _holds_placeholder(value: Any) -> bool:
    if isinstance(value, str):
        return _PLACEHOLDER in value
    if isinstance(value, Mapping):
        return any(_holds_placeholder(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(_holds_placeholder(v) for v in value)
    return False


def _with_images(message: dict[str, Any], images: Mapping[str, Any]) -> dict[str, Any]:
    content = message.get("content")
    if not isinstance(content, list):
        return message
    blocks = []
    for block in content:
        if isinstance(block, dict) and block.get("type") == "image" and "feature" in block:
            frame = images.get(str(block["feature"]))
            if frame is None:
                continue  # the camera is not rendered in this run: the text still goes
            block = {"type": "image", "image": frame}
        blocks.append(block)
    return {**message, "content": blocks}
