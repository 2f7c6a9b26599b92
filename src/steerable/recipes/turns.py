"""Chat-turn templates: one `MessageTurn` of a recipe, its checks and its compiled content blocks.

Below `steerable.recipes.model` (the recipes made of turns) and `steerable.recipes.building` (which
builds turns from plain data), so both import it one way; `model` re-exports every name.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from steerable.errors import with_article
from steerable.recipes._where import KeyPath, RecipeFieldError, did_you_mean
from steerable.recipes.expressions import DEFAULT_BINDINGS, PLACEHOLDER_RE, ROLES, Template

__all__ = [
    "BUILTIN_BINDING_NAMES",
    "ROUTES",
    "STREAMS",
    "BlockTemplate",
    "MessageTurn",
    "Role",
    "Route",
    "Stream",
]

Role = Literal["user", "assistant", "system", "tool"]
Stream = Literal["high_level", "low_level"]
Route = Literal["vqa"]
STREAMS: tuple[str, ...] = get_args(Stream)
ROUTES: tuple[str, ...] = get_args(Route)
# `task` is always bound (dataset task or a task_aug rephrasing); the rest are default resolvers.
BUILTIN_BINDING_NAMES: frozenset[str] = frozenset(DEFAULT_BINDINGS) | {"task"}

# A content block compiled for rendering: (key, template or None, value) per field.
BlockTemplate = tuple[tuple[str, "Template | None", Any], ...]


@dataclass(frozen=True)
class MessageTurn:
    """One chat turn template; `stream` is required even though it is written after `content`."""

    role: Role
    content: str | tuple[dict[str, Any], ...] | None = None
    stream: Stream | None = None
    target: bool = False
    if_present: str | None = None
    tool_calls_from: str | None = None
    # steerable only: the turn is left out when this binding resolves to a row (on a target turn,
    # the component renders nothing on such frames).
    if_absent: str | None = None
    compiled: Template | tuple[BlockTemplate, ...] | None = field(
        default=None, init=False, compare=False, repr=False
    )

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise RecipeFieldError(
                ("role",), f"unsupported role {self.role!r}{did_you_mean(str(self.role), ROLES)}; "
                f"use one of {', '.join(ROLES)}"
            )
        if self.stream is None:
            raise RecipeFieldError(
                (), f"turn (role {self.role!r}) is missing a stream: add `stream: high_level` or `stream: low_level`"
            )
        if self.stream not in STREAMS:
            raise RecipeFieldError(
                ("stream",), f"unsupported stream {self.stream!r}{did_you_mean(str(self.stream), STREAMS)}; "
                f"use one of {', '.join(STREAMS)}"
            )
        if not isinstance(self.target, bool):
            raise RecipeFieldError(("target",), f"target must be true or false, got {self.target!r}")
        for key in ("if_present", "tool_calls_from", "if_absent"):
            value = getattr(self, key)
            if value is not None and not isinstance(value, str):
                raise RecipeFieldError((key,), f"{key} must name a binding, got {value!r}")
        if self.if_absent == "task":
            raise RecipeFieldError(("if_absent",), "task is always bound, so `if_absent: task` never renders the turn")
        if self.content is None and self.tool_calls_from is None:
            raise RecipeFieldError((), "turn needs content (unless tool_calls_from is set)")
        object.__setattr__(self, "compiled", self._compile())

    def _compile(self) -> Template | tuple[BlockTemplate, ...] | None:
        content = self.content
        if content is None:
            return None
        if isinstance(content, str):
            return Template(content)
        if not isinstance(content, (list, tuple)):
            raise RecipeFieldError(
                ("content",), f"content must be a string or a list of blocks, got {type(content).__name__}"
            )
        object.__setattr__(self, "content", tuple(content))
        return tuple(_compile_block(block, ("content", i)) for i, block in enumerate(content))

    @property
    def referenced_bindings(self) -> frozenset[str]:
        """Binding names this turn reads: if_present, if_absent, tool_calls_from and every `${name}`."""
        return self.value_bindings | ({self.if_absent} if self.if_absent is not None else set())

    @property
    def value_bindings(self) -> frozenset[str]:
        """The bindings whose rows the turn needs (all but `if_absent`, which only leaves it out)."""
        names = {n for n in (self.if_present, self.tool_calls_from) if n is not None}
        if isinstance(self.compiled, Template):
            names |= self.compiled.names
        elif self.compiled is not None:
            for block in self.compiled:
                names.update(n for _, tpl, _ in block if tpl is not None for n in tpl.names)
        return frozenset(names)


def _compile_block(block: Any, path: KeyPath) -> BlockTemplate:
    """Check an HF-style block (`{type: image, feature: ...}` / `{type: text, text: ...}`) and compile it."""
    if not isinstance(block, Mapping) or not isinstance(block.get("type"), str):
        raise RecipeFieldError(path, "a content block must be a mapping with a string `type` (image or text)")
    required = {"image": "feature", "text": "text"}.get(block["type"])
    if required is not None and not isinstance(block.get(required), str):
        raise RecipeFieldError(path, f"{with_article(block['type'])} block needs a string `{required}`")
    return tuple(
        (str(key), Template(value) if isinstance(value, str) and PLACEHOLDER_RE.search(value) else None, value)
        for key, value in block.items()
    )
