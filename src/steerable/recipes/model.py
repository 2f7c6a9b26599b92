"""Recipe model: chat-turn templates, message recipes, weighted blends, and their validation.

A recipe is either a *message recipe* (turns plus optional bindings) or a *blend* that maps
component names to weighted message recipes. Everything is checked at construction, and each
failure names the key path that caused it; `steerable.recipes.loading` adds file and line.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from steerable.errors import with_article
from steerable.recipes._where import KeyPath, RecipeFieldError, did_you_mean
from steerable.recipes.expressions import (
    DEFAULT_BINDINGS,
    PLACEHOLDER_RE,
    ROLES,
    ResolverCall,
    Template,
    parse_resolver,
)

__all__ = [
    "BUILTIN_BINDING_NAMES",
    "ROLES",
    "STREAMS",
    "BlockTemplate",
    "MessageTurn",
    "Recipe",
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


@dataclass(frozen=True)
class Recipe:
    """A message recipe (`messages` + `bindings`) or a blend of weighted message recipes."""

    messages: tuple[MessageTurn, ...] | None = None
    bindings: Mapping[str, ResolverCall] = field(default_factory=dict)
    blend: Mapping[str, Recipe] | None = None
    weight: float | None = None
    route: Route | None = None
    description: str | None = None
    cameras: Mapping[str, str] = field(default_factory=dict)
    origin: str = field(default="<recipe>", compare=False)
    binding_sites: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)
    # Per-options compiled render plans, filled by steerable.recipes.render on first use.
    render_cache: dict[Any, Any] = field(default_factory=dict, init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.messages is not None and self.blend is not None:
            raise RecipeFieldError((), "a recipe sets either messages or blend, not both")
        if self.messages is None and self.blend is None:
            raise RecipeFieldError((), "a recipe must set one of messages (a message recipe) or blend")
        if self.route is not None and self.route not in ROUTES:
            raise RecipeFieldError(("route",), f"unsupported route {self.route!r}; the only route is 'vqa'")
        if self.blend is not None and self.route is not None:
            raise RecipeFieldError(("route",), "route can only be set on a message recipe inside a blend")
        object.__setattr__(self, "bindings", self._parsed_bindings())
        if self.messages is not None:
            object.__setattr__(self, "messages", tuple(self.messages))
            self._check_messages()
        else:
            self._check_blend()

    def _parsed_bindings(self) -> dict[str, ResolverCall]:
        parsed: dict[str, ResolverCall] = {}
        for name, spec in self.bindings.items():
            path: KeyPath = ("bindings", name)
            if not isinstance(name, str) or not PLACEHOLDER_RE.fullmatch(f"${{{name}}}"):
                raise RecipeFieldError(path, "a binding name must be an identifier (letters, digits, _)")
            if name == "task":
                raise RecipeFieldError(path, "`task` is built in (dataset task or task_aug); pick another name")
            if isinstance(spec, str):
                try:
                    spec = parse_resolver(spec)
                except RecipeFieldError as exc:
                    raise RecipeFieldError(path, exc.message) from None
            if not isinstance(spec, ResolverCall):
                raise RecipeFieldError(path, f"a binding must be a resolver expression, got {spec!r}")
            parsed[name] = spec
        if self.blend is not None and parsed:
            raise RecipeFieldError(("bindings",), "bindings on a blend are never used; declare them in components")
        return parsed

    def _check_messages(self) -> None:
        known = BUILTIN_BINDING_NAMES | set(self.bindings)
        for i, turn in enumerate(self.messages or ()):
            if not isinstance(turn, MessageTurn):
                raise RecipeFieldError(("messages", i), f"expected a MessageTurn, got {type(turn).__name__}")
            unknown = sorted(turn.referenced_bindings - known)
            if unknown:
                raise RecipeFieldError(
                    ("messages", i, _key_referencing(turn, unknown[0])),
                    f"unknown binding {unknown[0]!r}{did_you_mean(unknown[0], known)}; declare it under "
                    f"`bindings:` or use one of {', '.join(sorted(known))}",
                )
            if turn.tool_calls_from == "task":
                raise RecipeFieldError(
                    ("messages", i, "tool_calls_from"), "task is text and has no tool calls; name a row binding"
                )
        if not any(t.target or t.stream == "low_level" for t in self.messages or ()):
            raise RecipeFieldError(
                ("messages",),
                "no supervised turn: mark a turn `target: true` (text loss) or use `stream: low_level` (action loss)",
            )

    def _check_blend(self) -> None:
        blend = self.blend or {}
        if not blend:
            raise RecipeFieldError(("blend",), "a blend needs at least one component")
        for name, component in blend.items():
            path: KeyPath = ("blend", name)
            if component.blend is not None:
                raise RecipeFieldError(path + ("blend",), "a blend component cannot itself define a blend")
            if component.messages is None:
                raise RecipeFieldError(path, "a blend component must define messages")
            weight = component.weight
            if weight is None:
                raise RecipeFieldError(path, "a blend component must define a weight")
            if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not math.isfinite(weight):
                raise RecipeFieldError(path + ("weight",), f"weight must be a number, got {weight!r}")
            if weight <= 0:
                raise RecipeFieldError(path + ("weight",), f"a blend component needs a positive weight, got {weight}")

    @property
    def is_blend(self) -> bool:
        return self.blend is not None

    def components(self) -> Sequence[tuple[str, Recipe]]:
        """`(name, message recipe)` pairs in blend order; a message recipe is its own single component."""
        return tuple(self.blend.items()) if self.blend is not None else (("", self),)

    def referenced_binding_names(self) -> frozenset[str]:
        """Binding names the recipe's own turns read (empty for a blend)."""
        return frozenset().union(*(t.referenced_bindings for t in self.messages or ()))

    def binding(self, name: str) -> ResolverCall:
        """The resolver behind `name`: declared bindings override the defaults."""
        return self.bindings.get(name) or DEFAULT_BINDINGS[name]

    @property
    def camera_keys(self) -> frozenset[str]:
        """Dataset camera keys the recipe reads (binding `camera=` values and block `feature`s)."""
        keys: set[str] = set()
        for _, component in self.components():
            keys.update(c.camera for c in component.bindings.values() if c.camera)
            for turn in component.messages or ():
                if isinstance(turn.content, tuple):
                    keys.update(b["feature"] for b in turn.content if isinstance(b.get("feature"), str))
        return frozenset(keys)

    @classmethod
    def from_dict(
        cls, data: Mapping[str, Any], *, camera_map: Mapping[str, str] | None = None, origin: str = "<recipe>"
    ) -> Recipe:
        """Build and validate a recipe from plain data; errors name the key path (`blend.x.messages[1]`)."""
        from steerable.recipes.building import build_recipe  # building imports this module

        return build_recipe(data, origin=origin, camera_map=camera_map)


def _key_referencing(turn: MessageTurn, name: str) -> str:
    """The turn key that mentions binding `name`, so the error points at the right line."""
    if turn.if_present == name:
        return "if_present"
    if turn.tool_calls_from == name:
        return "tool_calls_from"
    if turn.if_absent == name:
        return "if_absent"
    return "content"
