"""Style registry: which styles exist, which column each lives in, and the camera rule."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Literal

from steerable.errors import LanguageSchemaError

__all__ = [
    "CONTEXT_STYLES",
    "CORE_STYLES",
    "EVENT_ONLY_STYLES",
    "EXTENDED_STYLES",
    "LANGUAGE_COLUMNS",
    "LANGUAGE_EVENTS",
    "LANGUAGE_PERSISTENT",
    "ContextStyle",
    "LanguageColumn",
    "PERSISTENT_STYLES",
    "PERSISTENT_STYLE_ORDER",
    "STYLE_REGISTRY",
    "VIEW_DEPENDENT_STYLES",
    "column_for_style",
    "is_language_column",
    "is_view_dependent_style",
    "validate_camera_field",
]

LANGUAGE_PERSISTENT = "language_persistent"
LANGUAGE_EVENTS = "language_events"
LANGUAGE_COLUMNS: tuple[str, str] = (LANGUAGE_PERSISTENT, LANGUAGE_EVENTS)
LanguageColumn = Literal["language_persistent", "language_events"]

# The robot's running context (what a high-level step reads and writes), in the order it is shown.
ContextStyle = Literal["subtask", "plan", "memory"]
CONTEXT_STYLES: tuple[ContextStyle, ...] = ("subtask", "plan", "memory")
# The core persistent styles in display order (viewers iterate it; PERSISTENT_STYLES is the set).
PERSISTENT_STYLE_ORDER: tuple[str, ...] = (*CONTEXT_STYLES, "motion", "task_aug")
PERSISTENT_STYLES: set[str] = set(PERSISTENT_STYLE_ORDER)
EVENT_ONLY_STYLES: set[str] = {"interjection", "vqa", "trace"}
CORE_STYLES: frozenset[str] = frozenset(PERSISTENT_STYLES | EVENT_ONLY_STYLES)
# Extension point: a project style must be added here *and* to PERSISTENT_STYLES or
# EVENT_ONLY_STYLES. Unlike the reference, the registry below is read live, so late additions count.
EXTENDED_STYLES: set[str] = set()
VIEW_DEPENDENT_STYLES: frozenset[str] = frozenset({"vqa", "trace"})


class _StyleRegistry:
    """A live view of CORE_STYLES | EXTENDED_STYLES (supports `in`, iteration, len)."""

    def _current(self) -> frozenset[str]:
        return CORE_STYLES | frozenset(EXTENDED_STYLES)

    def __contains__(self, style: object) -> bool:
        return style in self._current()

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._current()))

    def __len__(self) -> int:
        return len(self._current())

    def __le__(self, other: object) -> bool:
        return self._current() <= other  # type: ignore[operator]

    def __ge__(self, other: object) -> bool:
        return self._current() >= other  # type: ignore[operator]

    def __repr__(self) -> str:
        return f"STYLE_REGISTRY({sorted(self._current())})"


STYLE_REGISTRY = _StyleRegistry()


def column_for_style(style: str | None) -> LanguageColumn:
    """The language column a row of `style` belongs in; `None` (tool-call atoms) is an event."""
    if style is None:
        return "language_events"
    if style in PERSISTENT_STYLES:
        return "language_persistent"
    if style in EVENT_ONLY_STYLES:
        return "language_events"
    known = ", ".join(sorted(PERSISTENT_STYLES | EVENT_ONLY_STYLES))
    raise LanguageSchemaError(f"unknown language style {style!r}; known styles: {known}")


def is_language_column(key: str) -> bool:
    return key in LANGUAGE_COLUMNS


def is_view_dependent_style(style: str | None) -> bool:
    return style in VIEW_DEPENDENT_STYLES


def validate_camera_field(style: str | None, camera: str | None) -> None:
    """View-dependent rows (vqa, trace) must name a camera; every other row must not."""
    if is_view_dependent_style(style):
        if not camera:
            raise LanguageSchemaError(
                f"rows of view-dependent style {style!r} need a non-empty camera "
                "(a camera feature key of the dataset, e.g. 'observation.images.top')"
            )
    elif camera is not None:
        raise LanguageSchemaError(
            f"rows of style {style!r} are not view-dependent and must have camera=None, "
            f"got camera={camera!r}"
        )
