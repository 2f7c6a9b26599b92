"""Prompt templates: text files with named `{placeholders}`, each with a stable content-derived id.

Each annotation module keeps its templates in its own folder, `modules/<module>/prompts/<name>.txt`,
and reads them through a `PromptFolder`. A placeholder is `{identifier}`; a literal brace is written
doubled (`{{` / `}}`). The id (`name@<sha>`) changes whenever the text changes, so
staging fingerprints that include it re-run episodes annotated with an older prompt.
"""

from __future__ import annotations

import functools
import hashlib
import string
from dataclasses import dataclass
from importlib import resources

from steerable.errors import ConfigError

__all__ = ["Prompt", "PromptFolder"]

_FOLDER = "prompts"
_SHA_CHARS = 10


@dataclass(frozen=True)
class Prompt:
    """One template: its file name, text, id and the placeholders `render` requires."""

    name: str
    text: str
    id: str
    placeholders: frozenset[str]

    def render(self, **values: object) -> str:
        """Fill every placeholder; a missing or unexpected value is an error, never a silent blank."""
        missing = sorted(self.placeholders - values.keys())
        extra = sorted(values.keys() - self.placeholders)
        if missing or extra:
            parts = []
            if missing:
                parts.append(f"missing {missing}")
            if extra:
                parts.append(f"unexpected {extra}")
            raise ConfigError(f"prompt {self.name!r}: {' and '.join(parts)} placeholder value(s)")
        return self.text.format_map({k: str(v) for k, v in values.items()})


def _placeholders(name: str, text: str) -> frozenset[str]:
    """Named fields of a template; positional, indexed or formatted fields are rejected."""
    found: set[str] = set()
    try:
        parsed = list(string.Formatter().parse(text))
    except ValueError as exc:  # an unmatched single brace
        raise ConfigError(f"prompt {name!r} is malformed ({exc}); write literal braces as {{{{ and }}}}") from exc
    for _, field, spec, conversion in parsed:
        if field is None:
            continue
        if not field.isidentifier() or spec or conversion:
            raise ConfigError(
                f"prompt {name!r} has placeholder {{{field}}}: only plain {{name}} fields are allowed"
            )
        found.add(field)
    return frozenset(found)


class PromptFolder:
    """The `prompts/` folder of one package (an annotation module): its templates by name."""

    def __init__(self, package: str) -> None:
        self.package = package

    def names(self) -> list[str]:
        """Names of every template in the folder."""
        folder = resources.files(self.package).joinpath(_FOLDER)
        return sorted(p.name[: -len(".txt")] for p in folder.iterdir() if p.name.endswith(".txt"))

    def load(self, name: str) -> Prompt:
        """The template `name` (files are read once per process; they ship with the package)."""
        return _load(self.package, name)


@functools.cache
def _load(package: str, name: str) -> Prompt:
    if not name.replace("_", "").isalnum():
        raise ConfigError(f"invalid prompt name {name!r}: use letters, digits and underscores")
    resource = resources.files(package).joinpath(_FOLDER).joinpath(f"{name}.txt")
    if not resource.is_file():
        known = ", ".join(PromptFolder(package).names()) or "none"
        raise ConfigError(f"no prompt named {name!r} in {package}; known prompts: {known}")
    text = resource.read_text(encoding="utf-8").rstrip()  # no trailing blank lines when nested
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:_SHA_CHARS]
    return Prompt(name=name, text=text, id=f"{name}@{digest}", placeholders=_placeholders(name, text))
