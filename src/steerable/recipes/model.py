"""Recipe model: chat-turn templates, message recipes, weighted blends, and their validation.

A recipe is either a *message recipe* (turns plus optional bindings) or a *blend* that maps
component names to weighted message recipes. Everything is checked at construction, and each
failure names the key path that caused it; `steerable.recipes.loading` adds file and line.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from steerable.recipes._where import KeyPath, RecipeFieldError, did_you_mean
from steerable.recipes.building import build_recipe
from steerable.recipes.expressions import (
    DEFAULT_BINDINGS,
    PLACEHOLDER_RE,
    ROLES,
    ResolverCall,
    parse_resolver,
)
from steerable.recipes.turns import (
    BUILTIN_BINDING_NAMES,
    ROUTES,
    STREAMS,
    BlockTemplate,
    MessageTurn,
    Role,
    Route,
    Stream,
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

log = logging.getLogger(__name__)

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
        cls,
        data: Mapping[str, Any],
        *,
        camera_map: Mapping[str, str] | None = None,
        origin: str = "<recipe>",
        lines: Mapping[KeyPath, int] | None = None,
    ) -> Recipe:
        """Build and validate a recipe from plain data; errors name the key path (`blend.x.messages[1]`),
        and its YAML line where `lines` maps key paths to lines (`steerable.recipes.loading`)."""
        recipe = build_recipe(data, make=cls, origin=origin, camera_map=camera_map, lines=lines)
        twins = recipe.blend is not None and len(set(recipe.cameras.values())) < len(recipe.cameras)
        return recipe._camera_twins_merged() if twins else recipe

    def _camera_twins_merged(self) -> Recipe:
        """Two recipe cameras bound to one dataset camera (a one-camera dataset) make their per-camera
        components identical: each such set renders once, as its first component, which takes the
        others' weight (so the blend's share of it is unchanged)."""
        merged: dict[str, Recipe] = {}
        for name, component in self.components():
            shape = (component.messages, component.bindings, component.route)
            twin = next((n for n, c in merged.items() if (c.messages, c.bindings, c.route) == shape), None)
            if twin is None:
                merged[name] = component
                continue
            first = merged[twin]
            merged[twin] = dataclasses.replace(first, weight=(first.weight or 0.0) + (component.weight or 0.0))
            log.info("%s: blend component %r reads the same camera as %r: merged into it", self.origin, name, twin)
        return self if len(merged) == len(self.components()) else dataclasses.replace(self, blend=merged)


def _key_referencing(turn: MessageTurn, name: str) -> str:
    """The turn key that mentions binding `name`, so the error points at the right line."""
    if turn.if_present == name:
        return "if_present"
    if turn.tool_calls_from == name:
        return "tool_calls_from"
    if turn.if_absent == name:
        return "if_absent"
    return "content"
