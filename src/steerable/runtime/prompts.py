"""High-level prompts for the VLM planner, rendered by a recipe: the message layout the model saw in
training.

The VLM planner asks for a `purpose` (the next subtask, a memory note, the spoken reply to an
interjection, an answer about the scene); each is one of the questions `steerable.recipes.live`
renders from the live context (the same renderer a trained policy's runtime uses), with the current
camera frames in the image blocks.
"""

from __future__ import annotations

from typing import Any, Literal

from steerable.control import LanguageContext, Observation, RequestKind
from steerable.errors import ConfigError
from steerable.recipes import Recipe, load_recipe
from steerable.recipes.live import LivePrompts, Question

__all__ = ["DEFAULT_RECIPE", "PURPOSES", "Purpose", "RecipePrompts"]

DEFAULT_RECIPE = "subtask_mem_vqa_speech"
Purpose = Literal["subtask", "memory", "speech", "vqa"]
PURPOSES: tuple[Purpose, ...] = ("subtask", "memory", "speech", "vqa")
# The recipe questions that serve each purpose, first found first: a VLM asked for "the subtask"
# takes the one written from task, plan and memory, else the one written from the task alone.
_QUESTIONS: dict[Purpose, tuple[Question, ...]] = {
    "subtask": ("subtask", "progress"), "memory": ("memory",), "speech": ("interjection",), "vqa": ("vqa",),
}
_KIND_PURPOSE: dict[str, Purpose] = {"update": "subtask", "interjection": "speech", "ask": "vqa"}


class RecipePrompts:
    """Callable `(kind, state, observation, user_text) -> messages` for the runtime's high level."""

    def __init__(self, recipe: Recipe, *, origin: str = "") -> None:
        self.live = LivePrompts(recipe, origin=origin)
        if not self.has("subtask"):
            raise ConfigError(
                f"recipe {origin or '(given)'} has no high-level component whose target is the subtask; "
                f"use one that trains subtask generation (e.g. {DEFAULT_RECIPE})"
            )

    @classmethod
    def load(cls, source: str | None) -> RecipePrompts:
        """A builtin recipe name or a YAML path (default: DEFAULT_RECIPE)."""
        recipe = load_recipe(source or DEFAULT_RECIPE)
        return cls(recipe, origin=source or DEFAULT_RECIPE)

    @property
    def recipe(self) -> Recipe:
        return self.live.recipe

    def _question(self, purpose: Purpose) -> Question | None:
        return next((q for q in _QUESTIONS[purpose] if self.live.has(q)), None)

    def has(self, purpose: Purpose) -> bool:
        return self._question(purpose) is not None

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
        question = self._question(purpose)
        if question is None:
            raise ConfigError(f"the recipe has no component that generates {purpose!r}")
        images = dict(observation.images) if observation is not None else {}
        return self.live.render(question, context, images=images, user_text=user_text, upcoming=new_subtask).messages

    def __call__(
        self, kind: RequestKind, state: Any, observation: Observation | None, user_text: str | None
    ) -> list[dict[str, Any]]:
        purpose = _KIND_PURPOSE[kind]
        if not self.has(purpose):
            purpose = "subtask"
        return self.render(purpose, state.snapshot(), observation, user_text=user_text)
