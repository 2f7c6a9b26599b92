"""Where a recipe error happened: key paths, YAML line lookup, and the located error they produce.

Validation code raises `RecipeFieldError` with a key path relative to the object it checks; the
builder that knows the object's position (and, for YAML, the line of every key) prefixes it, so a
message always reads `origin:line: key.path: what is wrong`.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from steerable.errors import RecipeError

__all__ = ["KeyPath", "Locator", "RecipeFieldError", "did_you_mean", "format_path"]

KeyPath = tuple["str | int", ...]


class RecipeFieldError(RecipeError):
    """A validation failure at `path` (relative to the checked object), not yet given a location."""

    def __init__(self, path: KeyPath, message: str) -> None:
        super().__init__(f"{format_path(path)}: {message}" if path else message)
        self.path = path
        self.message = message


def format_path(path: KeyPath) -> str:
    """`("blend", "a", "messages", 1)` -> `blend.a.messages[1]`."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """` (did you mean 'x'?)` for the closest choice, or an empty string."""
    close = difflib.get_close_matches(word, sorted(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


@dataclass(frozen=True)
class Locator:
    """Formats error locations for one recipe source (a YAML file, a built-in, or an in-code dict)."""

    origin: str
    lines: Mapping[KeyPath, int] = field(default_factory=dict)

    def line_of(self, path: KeyPath) -> int | None:
        """The line of `path`, or of its nearest ancestor that has one (e.g. for a missing key)."""
        for end in range(len(path), -1, -1):
            line = self.lines.get(path[:end])
            if line is not None:
                return line
        return None

    def where(self, path: KeyPath) -> str:
        """`origin:line` for `path` (no line for in-code recipes)."""
        line = self.line_of(path)
        return f"{self.origin}:{line}" if line is not None else self.origin

    def error(self, path: KeyPath, message: str, *, shown: KeyPath | None = None) -> RecipeError:
        """A RecipeError at `path`'s line; `shown` is the key path printed (default: `path`)."""
        shown = path if shown is None else shown
        prefix = f"{self.where(path)}: {format_path(shown)}" if shown else self.where(path)
        return RecipeError(f"{prefix}: {message}")

    def relocate(self, base: KeyPath, exc: RecipeFieldError) -> RecipeError:
        """Turn a `RecipeFieldError` raised while checking the object at `base` into a located error."""
        return self.error(base + exc.path, exc.message)
