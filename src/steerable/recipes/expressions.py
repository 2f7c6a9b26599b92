"""The two small languages inside a recipe: resolver expressions (bindings) and `${...}` templates.

Both are parsed once, at load time, so that every mistake in them is reported with its file, line
and key before any sample is rendered, and the per-frame path only evaluates precompiled objects.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from steerable.errors import LanguageSchemaError
from steerable.language.styles import (
    EVENT_ONLY_STYLES,
    PERSISTENT_STYLES,
    column_for_style,
    is_view_dependent_style,
)
from steerable.recipes._where import RecipeFieldError, did_you_mean

__all__ = [
    "CAMERA_RE",
    "DEFAULT_BINDINGS",
    "PLACEHOLDER_RE",
    "ROLES",
    "ResolverCall",
    "ResolverName",
    "STEERABLE_ONLY_RESOLVERS",
    "Template",
    "parse_resolver",
    "resolver_call",
    "value_text",
]

ResolverName = Literal["active_at", "emitted_at", "nth_prev", "nth_next", "last_emitted"]
RESOLVERS: tuple[str, ...] = get_args(ResolverName)
PERSISTENT_RESOLVERS = frozenset({"active_at", "nth_prev", "nth_next"})
# Resolvers steerable has and LeRobot's recipes do not (an export leaves out what reads them).
STEERABLE_ONLY_RESOLVERS = frozenset({"last_emitted"})
ROLES: tuple[str, ...] = ("assistant", "system", "tool", "user")

PLACEHOLDER_RE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
# `${camera:NAME}` names a recipe camera; it is replaced at load time, so it never reaches rendering.
CAMERA_RE = re.compile(r"\$\{camera:([^}]*)\}")
_CALL_RE = re.compile(r"^(?P<name>[A-Za-z_][A-Za-z0-9_]*)\((?P<args>.*)\)$", re.DOTALL)
_SELECTORS = ("style", "role", "camera", "tool_name")


@dataclass(frozen=True)
class ResolverCall:
    """A parsed binding such as `emitted_at(t, style=vqa, role=assistant, camera=observation.images.top)`."""

    resolver: ResolverName
    style: str | None = None
    role: str | None = None
    camera: str | None = None
    tool_name: str | None = None
    offset: int = 1
    # Derived once, read on every frame: whether it reads persistent rows or the frame's events,
    # and the selector tuple that keys the timeline's per-selector index.
    is_persistent: bool = field(default=False, init=False, compare=False, repr=False)
    reads_events: bool = field(default=False, init=False, compare=False, repr=False)
    selector: tuple[str | None, str | None, str | None, str | None] = field(
        default=(None, None, None, None), init=False, compare=False, repr=False
    )

    def __post_init__(self) -> None:
        persistent = self.style is not None and column_for_style(self.style) == "language_persistent"
        object.__setattr__(self, "is_persistent", persistent)
        object.__setattr__(self, "reads_events", self.resolver == "emitted_at" and not persistent)
        object.__setattr__(self, "selector", (self.style, self.role, self.camera, self.tool_name))

    def __str__(self) -> str:
        args = [f"{key}={value}" for key, value in zip(_SELECTORS, self.selector, strict=True) if value is not None]
        if self.resolver in ("nth_prev", "nth_next"):
            args.append(f"offset={self.offset}")
        return f"{self.resolver}({', '.join(args)})"


def parse_resolver(expr: str) -> ResolverCall:
    """Parse and check a binding expression; raises RecipeFieldError (without location) when invalid."""
    match = _CALL_RE.match(expr.strip()) if isinstance(expr, str) else None
    if match is None:
        raise RecipeFieldError(
            (), f"invalid resolver expression {expr!r}: write it as e.g. active_at(t, style=subtask)"
        )
    name = match["name"]
    if name not in RESOLVERS:
        raise RecipeFieldError(
            (), f"unknown resolver {name!r}{did_you_mean(name, RESOLVERS)}; use one of {', '.join(RESOLVERS)}"
        )
    allowed = _SELECTORS + (("offset",) if name in ("nth_prev", "nth_next") else ())
    args: dict[str, str] = {}
    for piece in (part.strip() for part in match["args"].split(",")):
        if not piece or piece == "t":
            continue  # the frame time is always passed; a bare `t` is accepted for readability
        key, sep, value = (s.strip() for s in piece.partition("="))
        if not sep:
            raise RecipeFieldError((), f"{name}: argument {piece!r} must be written key=value")
        if key not in allowed:
            raise RecipeFieldError(
                (), f"{name}: unknown argument {key!r}{did_you_mean(key, allowed)}; allowed: {', '.join(allowed)}"
            )
        if key in args:
            raise RecipeFieldError((), f"{name}: argument {key!r} is given twice")
        value = value.strip("'\"")
        if not value:
            raise RecipeFieldError((), f"{name}: argument {key!r} has an empty value")
        args[key] = value
    return _checked_call(name, args)


def resolver_call(
    resolver: str,
    *,
    style: str | None = None,
    role: str | None = None,
    camera: str | None = None,
    tool_name: str | None = None,
    offset: int = 1,
) -> ResolverCall:
    """A checked ResolverCall from keyword selectors (the in-code twin of `parse_resolver`)."""
    if resolver not in RESOLVERS:
        raise RecipeFieldError((), f"unknown resolver {resolver!r}; use one of {', '.join(RESOLVERS)}")
    selectors = {"style": style, "role": role, "camera": camera, "tool_name": tool_name}
    args = {key: value for key, value in selectors.items() if value is not None}
    if resolver in ("nth_prev", "nth_next"):
        args["offset"] = str(offset)
    return _checked_call(resolver, args)


def _checked_call(name: str, args: dict[str, str]) -> ResolverCall:
    style = args.get("style")
    try:
        column = column_for_style(style)
    except LanguageSchemaError as exc:
        raise RecipeFieldError((), f"{name}: {exc}") from None
    if name in PERSISTENT_RESOLVERS and (style is None or column != "language_persistent"):
        why = "needs a style=" if style is None else f"cannot read event-only style {style!r};"
        raise RecipeFieldError(
            (),
            f"{name} {why} persistent styles are {', '.join(sorted(PERSISTENT_STYLES))} "
            f"(use emitted_at for {', '.join(sorted(EVENT_ONLY_STYLES))})",
        )
    if name == "last_emitted" and style is not None and column == "language_persistent":
        raise RecipeFieldError(
            (), f"last_emitted reads event rows (styles {', '.join(sorted(EVENT_ONLY_STYLES))}, or no style); "
            f"for the persistent style {style!r} use active_at"
        )
    role = args.get("role")
    if role is not None and role not in ROLES:
        raise RecipeFieldError((), f"{name}: unknown role {role!r}{did_you_mean(role, ROLES)}")
    if "camera" in args and style is not None and not is_view_dependent_style(style):
        raise RecipeFieldError(
            (), f"{name}: camera= never matches style {style!r}: only vqa and trace rows carry a camera"
        )
    offset = 1
    if "offset" in args:
        try:
            offset = int(args["offset"])
        except ValueError:
            raise RecipeFieldError((), f"{name}: offset must be an integer, got {args['offset']!r}") from None
        if offset == 0:
            raise RecipeFieldError((), f"{name}: offset must be non-zero")
    return ResolverCall(
        name,  # type: ignore[arg-type]  # checked against RESOLVERS above
        style=style,
        role=role,
        camera=args.get("camera"),
        tool_name=args.get("tool_name"),
        offset=offset,
    )


DEFAULT_BINDINGS: Mapping[str, ResolverCall] = {
    "subtask": parse_resolver("active_at(t, style=subtask)"),
    "memory": parse_resolver("active_at(t, style=memory)"),
    "plan": parse_resolver("active_at(t, style=plan)"),
    "speech": parse_resolver("emitted_at(t, role=assistant, tool_name=say)"),
    "interjection": parse_resolver("emitted_at(t, style=interjection)"),
    "vqa": parse_resolver("emitted_at(t, style=vqa, role=assistant)"),
    "vqa_query": parse_resolver("emitted_at(t, style=vqa, role=user)"),
}


def value_text(value: Any) -> str:
    """How a bound value reads inside text: a row gives its content, None gives ''."""
    if value.__class__ is str:  # the fast path: task, or a row's text already extracted
        return value
    if value is None:
        return ""
    if isinstance(value, dict):
        content = value.get("content")
        return "" if content is None else str(content)
    return str(value)


class Template:
    """A string with `${name}` placeholders, split once so rendering is a join."""

    __slots__ = ("_only", "_parts", "names", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        # re.split with one group alternates literal, name, literal, ...; names sit at odd positions.
        self._parts = PLACEHOLDER_RE.split(text)
        self.names = frozenset(self._parts[1::2])
        # The common template is exactly one placeholder; its name, or None.
        parts = self._parts
        self._only = parts[1] if len(parts) == 3 and not parts[0] and not parts[2] else None

    def render(self, values: Mapping[str, Any]) -> str:
        if self._only is not None:
            return value_text(values[self._only])
        if not self.names:
            return self.text
        return "".join(value_text(values[p]) if i % 2 else p for i, p in enumerate(self._parts))

    def __repr__(self) -> str:
        return f"Template({self.text!r})"
