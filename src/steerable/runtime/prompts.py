"""High-level prompts rendered by a recipe: the message layout the model saw in training.

For each thing the runtime asks a model for (a `purpose`: the next subtask, a memory note, the
spoken reply to an interjection, an answer about the scene) we take the recipe component whose
target produces it, render it on a timeline built from the live context with a placeholder at the
target, and keep the messages before the target turn. Image blocks get the current camera frame.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from steerable.control import LanguageContext, Observation, RequestKind
from steerable.errors import ConfigError
from steerable.language import speech_row
from steerable.language.styles import CONTEXT_STYLES
from steerable.recipes import EpisodeTimeline, Recipe, RenderOptions, load_recipe, render_sample

__all__ = ["DEFAULT_RECIPE", "PURPOSES", "Purpose", "RecipePrompts"]

DEFAULT_RECIPE = "subtask_mem_vqa_speech"
Purpose = Literal["subtask", "memory", "speech", "vqa"]
PURPOSES: tuple[Purpose, ...] = ("subtask", "memory", "speech", "vqa")
_NOW = 1.0  # the timeline's "now"; the live context sits at 0.0, before it
_PLACEHOLDER = "\x00target\x00"
# Components are rendered one by one, so a `route: vqa` component must be drawable on its own.
_OPTIONS = RenderOptions(task_source="dataset", vqa_routing="reference")
_KIND_PURPOSE: dict[str, Purpose] = {"update": "subtask", "interjection": "speech", "ask": "vqa"}


@dataclass(frozen=True)
class _Target:
    name: str
    recipe: Recipe
    camera: str | None


def _purpose_of(recipe: Recipe) -> tuple[Purpose, str | None] | None:
    """What the first target turn of a message recipe produces (and from which camera), if anything."""
    for turn in recipe.messages or ():
        if not turn.target:
            continue
        if turn.tool_calls_from is not None and recipe.binding(turn.tool_calls_from).tool_name == "say":
            return "speech", None
        for name in sorted(turn.referenced_bindings):
            if name == "task":
                continue
            call = recipe.binding(name)
            if call.style in ("subtask", "memory", "vqa") and call.role in (None, "assistant"):
                return call.style, call.camera  # type: ignore[return-value]
        return None
    return None


class RecipePrompts:
    """Callable `(kind, state, observation, user_text) -> messages` for the runtime's high level."""

    def __init__(self, recipe: Recipe, *, origin: str = "") -> None:
        self.recipe = recipe
        self.targets: dict[Purpose, list[_Target]] = {}
        for name, component in recipe.components():
            if any(t.stream == "high_level" for t in component.messages or ()):
                found = _purpose_of(component)
                if found is not None:
                    self.targets.setdefault(found[0], []).append(_Target(name, component, found[1]))
        if "subtask" not in self.targets:
            raise ConfigError(
                f"recipe {origin or '(given)'} has no high-level component whose target is the subtask; "
                f"use one that trains subtask generation (e.g. {DEFAULT_RECIPE})"
            )

    @classmethod
    def load(cls, source: str | None) -> RecipePrompts:
        """A builtin recipe name or a YAML path (default: DEFAULT_RECIPE)."""
        recipe = load_recipe(source or DEFAULT_RECIPE)
        return cls(recipe, origin=source or DEFAULT_RECIPE)

    def has(self, purpose: Purpose) -> bool:
        return purpose in self.targets

    def render(
        self,
        purpose: Purpose,
        context: LanguageContext,
        observation: Observation | None = None,
        *,
        user_text: str | None = None,
        new_subtask: str | None = None,
    ) -> list[dict[str, Any]]:
        """The prompt for `purpose`: the component's messages before its target turn."""
        targets = self.targets.get(purpose)
        if not targets:
            raise ConfigError(f"the recipe has no component that generates {purpose!r}")
        images = dict(observation.images) if observation is not None else {}
        target = next((t for t in targets if t.camera is None or t.camera in images), targets[0])
        rows: list[dict[str, Any]] = []
        for style in CONTEXT_STYLES:
            value = getattr(context, style)
            if value:
                rows.append({"role": "assistant", "content": value, "style": style, "timestamp": 0.0})
        events: list[dict[str, Any]] = []
        if purpose in ("subtask", "memory"):
            subtask = new_subtask if purpose == "memory" and new_subtask else _PLACEHOLDER
            rows.append({"role": "assistant", "content": subtask, "style": "subtask", "timestamp": _NOW})
        if purpose == "memory":
            rows.append({"role": "assistant", "content": _PLACEHOLDER, "style": "memory", "timestamp": _NOW})
        elif purpose == "speech":
            events += [{"role": "user", "content": user_text or "", "style": "interjection", "camera": None},
                       speech_row(_PLACEHOLDER)]
        elif purpose == "vqa":
            events += [{"role": "user", "content": user_text or "", "style": "vqa", "camera": target.camera},
                       {"role": "assistant", "content": _PLACEHOLDER, "style": "vqa", "camera": target.camera}]
        timeline = EpisodeTimeline(rows)
        sample = render_sample(target.recipe, timeline, t=_NOW, sample_idx=0, frame_events=events,
                               task=context.task, options=_OPTIONS)
        if sample is None or not sample.target_message_indices:
            raise ConfigError(f"recipe component {target.name!r} rendered no prompt for {purpose!r}")
        prompt = sample.messages[: sample.target_message_indices[0]]
        return [_with_images(m, images) for m in prompt]

    def __call__(
        self, kind: RequestKind, state: Any, observation: Observation | None, user_text: str | None
    ) -> list[dict[str, Any]]:
        purpose = _KIND_PURPOSE[kind]
        if not self.has(purpose):
            purpose = "subtask"
        return self.render(purpose, state.snapshot(), observation, user_text=user_text)


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
