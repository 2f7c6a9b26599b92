"""Dotted command-line flags (`--plan.frames_per_second=2`) and YAML files over a pydantic config tree.

The same tree loads from `--config file.yaml` and from flags; flags win. Unknown flags and bad
values raise ConfigError naming the flag, with a suggestion for typos.
"""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from steerable.errors import ConfigError
from steerable.settings import error_text

__all__ = ["flag_help", "iter_flags", "parse_config"]

M = TypeVar("M", bound=BaseModel)


def _unwrap(annotation: Any) -> tuple[Any, ...]:
    """The concrete types inside Optional/Union/Literal annotations."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        out: tuple[Any, ...] = ()
        for arg in typing.get_args(annotation):
            out += _unwrap(arg)
        return out
    return (annotation,)


def _submodel(annotation: Any) -> type[BaseModel] | None:
    for t in _unwrap(annotation):
        if isinstance(t, type) and issubclass(t, BaseModel):
            return t
    return None


def iter_flags(model: type[BaseModel], prefix: str = "") -> Iterator[tuple[str, Any, Any, str]]:
    """(flag name, annotation, default, description) for every leaf of the tree."""
    for name, field in model.model_fields.items():
        sub = _submodel(field.annotation)
        if sub is not None:
            yield from iter_flags(sub, f"{prefix}{name}.")
        else:
            default = field.get_default(call_default_factory=True)
            yield f"{prefix}{name}", field.annotation, default, field.description or ""


def _coerce(raw: str, annotation: Any) -> Any:
    """Turn a flag's text into a value of the field's type; strings stay verbatim."""
    kinds = _unwrap(annotation)
    origins = {typing.get_origin(k) or k for k in kinds}
    if raw.lower() in ("null", "none") and type(None) in kinds:
        return None
    if origins <= {str, type(None), typing.Literal, Path}:
        return raw
    value = yaml.safe_load(raw) if raw.strip() else raw
    if isinstance(value, str) and origins & {list, tuple} and "," in value:
        value = [yaml.safe_load(v.strip()) for v in value.split(",") if v.strip()]
    elif isinstance(value, str | int | float) and origins & {list, tuple} and not origins & {str}:
        value = [value]
    return value


def _set(tree: dict[str, Any], dotted: str, value: Any) -> None:
    parts = dotted.split(".")
    node = tree
    for part in parts[:-1]:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ConfigError(f"--{dotted}: {part!r} is a value, not a group")
        node = child
    node[parts[-1]] = value


def parse_config(model: type[M], argv: Sequence[str], *, config_flag: str = "--config") -> M:
    """Build `model` from an optional YAML file and dotted flags (flags override the file)."""
    leaves = {name: (ann, default) for name, ann, default, _ in iter_flags(model)}
    tree: dict[str, Any] = {}
    flags: list[tuple[str, str | None]] = []
    args = list(argv)
    i = 0
    while i < len(args):
        arg = args[i]
        if not arg.startswith("--"):
            raise ConfigError(f"unexpected argument {arg!r}: options look like --name=value")
        key, eq, text = arg[2:].partition("=")
        value: str | None = text
        if not eq:
            nxt = args[i + 1] if i + 1 < len(args) else None
            if nxt is not None and not nxt.startswith("--"):
                value, i = nxt, i + 1
            else:
                value = None  # bare boolean switch
        flags.append((key, value if (eq or value is not None) else None))
        i += 1
    for key, value in flags:
        if f"--{key}" == config_flag:
            if value is None:
                raise ConfigError(f"{config_flag} needs a file path")
            tree = _load_yaml(Path(value))
            _check_keys(tree, leaves, Path(value))
    for key, value in flags:
        if f"--{key}" == config_flag:
            continue
        if key not in leaves:
            raise ConfigError(f"unknown option --{key}{_suggest(key, leaves, '--')}")
        annotation, _ = leaves[key]
        if value is None:
            if bool not in _unwrap(annotation):
                raise ConfigError(f"--{key} needs a value")
            parsed: Any = True
        else:
            try:
                parsed = _coerce(value, annotation)
            except yaml.YAMLError as exc:  # e.g. a JSON-valued flag such as --vlm.chat_template_kwargs
                problem = getattr(exc, "problem", None) or "cannot be parsed"
                raise ConfigError(f"--{key}: {value!r} is not valid JSON/YAML ({problem})") from exc
        _set(tree, key, parsed)
    try:
        return model.model_validate(tree)
    except ValidationError as exc:
        raise ConfigError(_describe(exc)) from exc


def _describe(exc: ValidationError) -> str:
    """One line for every problem; a section that already explained itself keeps its own words."""
    own: list[str] = []
    problems: list[str] = []
    for err in exc.errors():
        inner = (err.get("ctx") or {}).get("error")
        if isinstance(inner, ConfigError):  # a sub-config's validator named the flag already
            own.append(str(inner))
            continue
        where = ".".join(str(p) for p in err["loc"])
        problems.append(f"--{where}: {error_text(err)}" if where else error_text(err))
    if problems:
        own.append("invalid configuration: " + "; ".join(problems))
    return "; ".join(own)


def _suggest(key: str, leaves: Mapping[str, Any], prefix: str) -> str:
    """' (did you mean <prefix>closest?)' among the options and sections as deep as `key`, or --help."""
    depth = key.count(".") + 1
    names = {".".join(name.split(".")[:depth]) for name in leaves}
    close = difflib.get_close_matches(key, sorted(names), n=1)
    return f" (did you mean {prefix}{close[0]}?)" if close else " (see --help for every option)"


def _check_keys(tree: Mapping[str, Any], leaves: Mapping[str, Any], path: Path, prefix: str = "") -> None:
    """Every key of a config file names a section or an option, as a flag must."""
    for key, value in tree.items():
        dotted = f"{prefix}{key}"
        if dotted in leaves:
            continue
        if isinstance(value, Mapping) and any(name.startswith(dotted + ".") for name in leaves):
            _check_keys(value, leaves, path, dotted + ".")
            continue
        raise ConfigError(f"{path}: unknown key {dotted}{_suggest(dotted, leaves, '')}")


def _load_yaml(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise ConfigError(f"config file {path} does not exist") from exc
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"{path}{line}: invalid YAML: {getattr(exc, 'problem', exc)}") from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the config file must hold a mapping at the top level")
    return data


def flag_help(model: type[BaseModel]) -> str:
    """Every flag with its default and description, grouped by section."""
    lines: list[str] = []
    section = None
    for name, _annotation, default, doc in iter_flags(model):
        group = name.split(".")[0] if "." in name else ""
        if group != section:
            section = group
            lines.append(f"\n{group or 'general'}:")
        if default is None:
            shown: Any = "null"
        elif isinstance(default, list | tuple):
            shown = ",".join(str(v) for v in default)
        else:
            shown = default
        lines.append(f"  --{name}={shown}" + (f"    {doc}" if doc else ""))
    return "\n".join(lines).lstrip("\n")
