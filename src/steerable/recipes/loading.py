"""Load recipes from YAML files or by built-in name, keeping the line of every key for error messages.

YAML is parsed with the safe loader's composer and the node tree is walked by hand, so each key
path keeps its line (`recipes/x.yaml:12: blend.memory_update.messages[1]: unknown key 'targt'`),
duplicate keys are an error instead of a silent overwrite, and no Python object can be built.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from steerable.errors import RecipeError
from steerable.recipes._where import KeyPath, format_path
from steerable.recipes.model import Recipe

__all__ = ["builtin_recipe_names", "load_recipe", "parse_recipe"]

_MERGE_TAG = "tag:yaml.org,2002:merge"
_PLAIN_TAGS = frozenset(
    f"tag:yaml.org,2002:{kind}" for kind in ("map", "seq", "str", "int", "float", "bool", "null", "timestamp")
)


def builtin_recipe_names() -> tuple[str, ...]:
    """Names accepted by `load_recipe` without a path (the files in `steerable/recipes/builtin/`)."""
    folder = resources.files("steerable.recipes") / "builtin"
    return tuple(sorted(p.name[: -len(".yaml")] for p in folder.iterdir() if p.name.endswith(".yaml")))


def load_recipe(source: str | os.PathLike[str], *, camera_map: Mapping[str, str] | None = None) -> Recipe:
    """Load a recipe from a YAML file, or a built-in by name (`"subtask_mem"`).

    A plain name without a path separator or `.yaml`/`.yml` suffix is a built-in; anything else is a
    file. `camera_map` rebinds recipe cameras (names from `cameras:` or literal keys) to dataset keys.

    Raises:
        RecipeError: the file is missing, unreadable, not valid YAML, or not a valid recipe.
    """
    text_source = os.fspath(source)
    is_name = isinstance(source, str) and not any(s in text_source for s in ("/", os.sep)) and not (
        text_source.endswith((".yaml", ".yml"))
    )
    if is_name:
        names = builtin_recipe_names()
        if text_source not in names:
            raise RecipeError(
                f"no built-in recipe named {text_source!r}; built-ins: {', '.join(names)} "
                "(or pass the path of a .yaml file)"
            )
        resource = resources.files("steerable.recipes") / "builtin" / f"{text_source}.yaml"
        return parse_recipe(resource.read_text(encoding="utf-8"), origin=str(resource), camera_map=camera_map)
    path = Path(text_source)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise RecipeError(f"recipe file not found: {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise RecipeError(f"cannot read recipe file {path}: {exc}") from None
    return parse_recipe(text, origin=text_source, camera_map=camera_map)


def parse_recipe(text: str, *, origin: str = "<recipe>", camera_map: Mapping[str, str] | None = None) -> Recipe:
    """Parse recipe YAML text; `origin` (a path) prefixes every error message.

    Raises:
        RecipeError: invalid YAML or an invalid recipe, with origin, line and key path.
    """
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = f":{mark.line + 1}" if mark is not None else ""
        raise RecipeError(f"{origin}{line}: invalid YAML: {exc.problem or exc.context}") from None
    except yaml.YAMLError as exc:
        raise RecipeError(f"{origin}: invalid YAML: {exc}") from None
    if node is None:
        raise RecipeError(f"{origin}: the recipe is empty; it needs `messages:` or `blend:`")
    walker = _Walker(origin)
    data = walker.value(node, ())
    return Recipe.from_dict(data, origin=origin, camera_map=camera_map, lines=walker.lines)


class _Walker:
    """Builds plain Python data from a YAML node tree while recording each key path's line (1-based)."""

    def __init__(self, origin: str) -> None:
        self.origin = origin
        self.lines: dict[KeyPath, int] = {}
        self._scalars = yaml.constructor.SafeConstructor()

    def value(self, node: yaml.Node, path: KeyPath) -> Any:
        if node.tag not in _PLAIN_TAGS:
            # The safe loader would refuse these too; refuse them here with a location.
            raise RecipeError(f"{self.origin}:{node.start_mark.line + 1}: YAML tag {node.tag!r} is not allowed")
        if isinstance(node, yaml.MappingNode):
            out: dict[Any, Any] = {}
            for key_node, value_node in self._pairs(node, path):
                key = self._key(key_node)
                key_path = path + (key if isinstance(key, str) else str(key),)
                self.lines.setdefault(key_path, key_node.start_mark.line + 1)
                out[key] = self.value(value_node, key_path)
            return out
        if isinstance(node, yaml.SequenceNode):
            items = []
            for i, item in enumerate(node.value):
                self.lines.setdefault(path + (i,), item.start_mark.line + 1)
                items.append(self.value(item, path + (i,)))
            return items
        return self._scalars.construct_object(node)

    def _key(self, node: yaml.Node) -> Any:
        if not isinstance(node, yaml.ScalarNode):
            raise RecipeError(f"{self.origin}:{node.start_mark.line + 1}: a mapping key must be plain text")
        return self.value(node, ())

    def _pairs(self, node: yaml.MappingNode, path: KeyPath) -> Iterator[tuple[yaml.Node, yaml.Node]]:
        """Explicit pairs (duplicates rejected), then keys from `<<: *anchor` merges not set explicitly."""
        seen: set[Any] = set()
        merged: list[tuple[yaml.Node, yaml.Node]] = []
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE_TAG:
                sources = value_node.value if isinstance(value_node, yaml.SequenceNode) else [value_node]
                for source in sources:
                    if not isinstance(source, yaml.MappingNode):
                        raise RecipeError(f"{self.origin}:{key_node.start_mark.line + 1}: `<<` merges mappings only")
                    merged.extend(self._pairs(source, path))
                continue
            key = self._key(key_node)
            if key in seen:
                where = f"{self.origin}:{key_node.start_mark.line + 1}"
                raise RecipeError(f"{where}: {format_path(path)}: duplicate key {key!r}" if path
                                  else f"{where}: duplicate key {key!r}")
            seen.add(key)
            yield key_node, value_node
        for key_node, value_node in merged:
            key = self._key(key_node)
            if key not in seen:
                seen.add(key)
                yield key_node, value_node
