"""Dotted command-line flags (`--plan.frames_per_second=2`) and YAML files over a pydantic config tree.

The same tree loads from `--config file.yaml` and from flags; flags win. Unknown flags and bad
values raise ConfigError naming the flag, with a suggestion for typos. A field's other names
(pydantic `AliasChoices`) are flags too, and a boolean `--name` also reads `--no_name` (false).
A model may pass a section through unparsed (`pass_through = {"robot": "robot"}`, flag section:
field): every `--robot.KEY=VALUE` then lands, as text, in that dict field, for another tool's own
parser (LeRobot's `--robot.*` and `--env.*` flags reach LeRobot's config machinery this way).
Every command built on a settings tree (annotate, train, run) registers with `add_command` and
parses with `parse_command`.
"""

from __future__ import annotations

import argparse
import difflib
import types
import typing
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import AliasChoices, BaseModel, ValidationError
from pydantic_core import PydanticUndefined

from steerable.errors import ConfigError
from steerable.settings import Settings, describe

__all__ = [
    "add_command", "flag_aliases", "flag_help", "iter_flags", "load_yaml", "parse_command", "parse_config", "suggest",
]

M = TypeVar("M", bound=Settings)
Value = str | list[str] | None  # a flag's text: None for a bare switch, a list for `nargs`
_BOOL_WORDS = frozenset({"true", "false"})


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
    """(flag name, annotation, default, description) for every leaf of the tree.

    A field's flag is its alias where it has one (`as_json` with alias `json` is `--json`).
    """
    for name, field in model.model_fields.items():
        flag = field.alias or name
        sub = _submodel(field.annotation)
        if sub is not None:
            yield from iter_flags(sub, f"{prefix}{flag}.")
        else:
            default = field.get_default(call_default_factory=True)
            yield f"{prefix}{flag}", field.annotation, default, field.description or ""


def flag_aliases(model: type[BaseModel], prefix: str = "") -> dict[str, str]:
    """{other name: flag name} for every field that accepts other names (`AliasChoices`)."""
    out: dict[str, str] = {}
    for name, field in model.model_fields.items():
        flag = field.alias or name
        sub = _submodel(field.annotation)
        if sub is not None:
            out.update(flag_aliases(sub, f"{prefix}{flag}."))
        elif isinstance(field.validation_alias, AliasChoices):
            for choice in field.validation_alias.choices:
                if isinstance(choice, str) and choice != flag:
                    out[f"{prefix}{choice}"] = f"{prefix}{flag}"
    return out


def _shapes(model: type[BaseModel], prefix: str = "") -> dict[str, dict[str, Any]]:
    """{flag name: how it reads the line} for every field whose `json_schema_extra` says so."""
    out: dict[str, dict[str, Any]] = {}
    for name, field in model.model_fields.items():
        flag = field.alias or name
        sub = _submodel(field.annotation)
        if sub is not None:
            out.update(_shapes(sub, f"{prefix}{flag}."))
        elif isinstance(field.json_schema_extra, dict):
            out[f"{prefix}{flag}"] = dict(field.json_schema_extra)
    return out


def _positional(model: type[Settings]) -> tuple[str, ...]:
    """The fields a command's bare words fill, in order (their flag names)."""
    return tuple(model.model_fields[n].alias or n for n in model.positional)


def _negation(name: str) -> str:
    """`section.no_name` for the boolean flag `section.name`."""
    head, dot, last = name.rpartition(".")
    return f"{head}{dot}no_{last}"


def _negated(key: str, leaves: Mapping[str, Any]) -> str | None:
    """The boolean flag that `--[section.]no_NAME` switches off, if there is one."""
    head, dot, last = key.rpartition(".")
    positive = f"{head}{dot}{last.removeprefix('no_')}"
    if last.startswith("no_") and positive in leaves and bool in _unwrap(leaves[positive]):
        return positive
    return None


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


def _split(argv: Sequence[str], leaves: Mapping[str, Any], aliases: Mapping[str, str],
           shapes: Mapping[str, Mapping[str, Any]]) -> tuple[list[tuple[str, Value]], list[str]]:
    """(name, text) of every `--name value` / `--name=value`, and the bare words (positional arguments)."""
    flags: list[tuple[str, Value]] = []
    words: list[str] = []
    args = list(argv)
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if not arg.startswith("--"):
            words.append(arg)
            continue
        key, eq, text = arg[2:].partition("=")
        if eq:
            flags.append((key, text))
            continue
        name = aliases.get(key, key)
        shape = shapes.get(name, {})
        following = [a for a in args[i:i + int(shape.get("nargs", 1))] if not a.startswith("--")]
        if "nargs" in shape:
            if len(following) < int(shape["nargs"]) or following != args[i:i + len(following)]:
                raise ConfigError(f"--{key} takes {shape['nargs']} values")
            flags.append((key, following))
            i += len(following)
            continue
        nxt = following[0] if following else None
        switch = name in leaves and bool in _unwrap(leaves[name])
        if nxt is None or (switch and nxt.lower() not in _BOOL_WORDS):
            flags.append((key, shape.get("bare")))  # a bare switch, or a flag with a value of its own
            continue
        flags.append((key, nxt))
        i += 1
    return flags, words


def _place(words: list[str], names: Sequence[str], tree: dict[str, Any]) -> dict[str, str]:
    """Put the bare words in the positional fields, in order; {field: word} of those given."""
    if len(words) > len(names):
        extra = words[len(names)]
        raise ConfigError(f"unexpected argument {extra!r}" + (
            ": options look like --name=value" if not names else f" (takes {', '.join(n.upper() for n in names)})"))
    placed = dict(zip(names, words, strict=False))
    tree.update(placed)
    return placed


def parse_config(model: type[M], argv: Sequence[str], *, config_flag: str = "--config") -> M:
    """Build `model` from an optional YAML file, dotted flags and bare words (flags override the file)."""
    leaves = {name: ann for name, ann, _, _ in iter_flags(model)}
    aliases = flag_aliases(model)
    known = {**leaves, **{alias: leaves[name] for alias, name in aliases.items()}}
    shapes = _shapes(model)
    tree: dict[str, Any] = {}
    passed = model.pass_through
    flags, words = _split(argv, leaves, aliases, shapes)
    for key, value in flags:
        if f"--{key}" == config_flag:
            if not isinstance(value, str) or not value:
                raise ConfigError(f"{config_flag} needs a file path")
            tree = load_yaml(Path(value))
            _check_keys(tree, known, Path(value))
            _own_names(tree, aliases)
    placed = _place(words, _positional(model), tree)
    given: dict[str, tuple[str, Value]] = {name: (name.upper(), word) for name, word in placed.items()}
    repeated: dict[str, list[str]] = {}
    for key, value in flags:
        if f"--{key}" == config_flag:
            continue
        negated = _negated(key, leaves) if key not in known else None
        if negated is not None:
            if value is not None:
                raise ConfigError(f"--{key} takes no value (it is --{negated} false)")
            _set(tree, negated, False)
            continue
        head, dot, rest = key.partition(".")
        if key not in known and dot and rest and head in passed:  # another parser's flag: kept as typed
            section = tree.setdefault(passed[head], {})
            if not isinstance(section, dict):
                raise ConfigError(f"--{key}: {passed[head]!r} is set as a whole already")
            section[rest] = "true" if value is None else value
            continue
        if key not in known:
            switches = {_negation(name): ann for name, ann in leaves.items() if bool in _unwrap(ann)}
            raise ConfigError(f"unknown option --{key}{suggest(key, {**known, **switches}, '--')}")
        spelling, key = f"--{key}", aliases.get(key, key)
        _once(given, key, spelling, value)
        if shapes.get(key, {}).get("repeat"):  # each occurrence one item, verbatim
            repeated.setdefault(key, []).append(value if isinstance(value, str) else "")
            continue
        _set(tree, key, _parse(key, value, leaves[key]))
    for key, values in repeated.items():
        _set(tree, key, values)
    for name in _positional(model):  # named as the usage line names it
        spellings = {name, *(alias for alias, flag in aliases.items() if flag == name)}
        if _required(model, name) and not spellings & tree.keys():
            raise ConfigError(f"{name.upper()} is required (also --{name})")
    try:
        return model.model_validate(tree)
    except ValidationError as exc:
        raise ConfigError(describe(exc)) from exc


def _own_names(tree: dict[str, Any], aliases: Mapping[str, str]) -> None:
    """A file's keys under the flag names they alias (`episodes` -> `only_episodes`), so that a flag given too
    replaces the value whichever of the field's names pydantic reads first; a file naming both keeps its own."""
    for alias, name in aliases.items():
        section, last = _node(tree, alias)
        if section is not None and last in section:
            value = section.pop(last)
            own, key = _node(tree, name)
            if own is None or key not in own:
                _set(tree, name, value)


def _node(tree: dict[str, Any], dotted: str) -> tuple[dict[str, Any] | None, str]:
    """The mapping that holds `dotted`'s last part in `tree` (None where a section is missing), and that part."""
    *sections, last = dotted.split(".")
    node: Any = tree
    for part in sections:
        node = node.get(part) if isinstance(node, dict) else None
    return (node if isinstance(node, dict) else None), last


def _required(model: type[BaseModel], flag: str) -> bool:
    """Whether the top-level field behind `flag` has no default."""
    return any((f.alias or n) == flag and f.is_required() for n, f in model.model_fields.items())


def _once(given: dict[str, tuple[str, Value]], key: str, spelling: str, value: Value) -> None:
    """A value named by two spellings (DATASET and --root) must be one value: which one was meant?"""
    first = given.setdefault(key, (spelling, value))
    if first[0] != spelling and first[1] != value:
        raise ConfigError(f"name the {key} once; got {first[0]} {first[1]}, {spelling} {value}")


def _parse(key: str, value: Value, annotation: Any) -> Any:
    """The typed value of one flag's text."""
    if isinstance(value, list):
        return value
    if value is None:
        if bool not in _unwrap(annotation):
            raise ConfigError(f"--{key} needs a value")
        return True
    try:
        return _coerce(value, annotation)
    except yaml.YAMLError as exc:  # e.g. a JSON-valued flag such as --vlm.chat_template_kwargs
        problem = getattr(exc, "problem", None) or "cannot be parsed"
        raise ConfigError(f"--{key}: {value!r} is not valid JSON/YAML ({problem})") from exc


def suggest(key: str, leaves: Mapping[str, Any], prefix: str) -> str:
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
        raise ConfigError(f"{path}: unknown key {dotted}{suggest(dotted, leaves, '')}")


def load_yaml(path: Path) -> dict[str, Any]:
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


def flag_help(model: type[Settings]) -> str:
    """Every flag with its default (its other names) and description; the command's own flags first,
    then one group per section."""
    aliases: dict[str, list[str]] = {}
    for alias, name in flag_aliases(model).items():
        aliases.setdefault(name, []).append(f"--{alias}")
    groups: dict[str, list[str]] = {"general": []}
    passed = {field: section for section, field in model.pass_through.items()}
    positional, shapes = _positional(model), _shapes(model)
    for name, annotation, default, doc in iter_flags(model):
        if name in passed:
            groups["general"].append(f"  --{passed[name]}.KEY=VALUE" + (f"    {doc}" if doc else ""))
            continue
        others = list(aliases.get(name, []))
        if name in positional:  # `DATASET (or --dataset, --root)`: the word, or its flags
            optional = "" if default is PydanticUndefined else "optional; "
            spellings = ", ".join([f"--{name}", *others])
            groups["general"].append(f"  {name.upper()} ({optional}or {spellings})" + (f"    {doc}" if doc else ""))
            continue
        if shapes.get(name, {}).get("repeat"):  # `--camera_map VALUE (repeatable)`: no default to show
            spellings = "".join(f", or {o}" for o in others)
            groups["general"].append(f"  --{name} VALUE (repeatable{spellings})" + (f"    {doc}" if doc else ""))
            continue
        if default is True and bool in _unwrap(annotation):
            others.append(f"--{_negation(name)}")
        notes = [f"takes {shapes[name]['nargs']} words"] if "nargs" in shapes.get(name, {}) else []
        notes += ["the value may be left out"] if "bare" in shapes.get(name, {}) else []
        if default is PydanticUndefined:
            flag = f"--{name} (required)"
        elif default is None:
            flag = f"--{name}=null"
        elif isinstance(default, list | tuple):
            flag = f"--{name}=" + ",".join(str(v) for v in default)
        else:
            flag = f"--{name}={default}"
        flag += f" (or {', '.join(others)})" if others else ""
        flag += f" ({'; '.join(notes)})" if notes else ""
        group = name.split(".")[0] if "." in name else "general"
        groups.setdefault(group, []).append(f"  {flag}" + (f"    {doc}" if doc else ""))
    groups["config"] = ["  --config FILE.yaml    options from a YAML file (keys as the flags, a section as a "
                        "mapping); flags given too win"]
    return "\n\n".join(f"{group}:\n" + "\n".join(lines) for group, lines in groups.items() if lines)


def add_command(
    sub: argparse._SubParsersAction, name: str, *, help: str, func: Callable[[argparse.Namespace], int]
) -> None:
    """A subcommand whose options are the flags of a settings tree, read by `parse_command` in `func`."""
    parser = sub.add_parser(name, help=help, add_help=False)
    parser.set_defaults(func=func)


def parse_command(model: type[M], args: argparse.Namespace, usage: str) -> M | None:
    """The command's settings from its options and `--config FILE.yaml`; None once `--help` printed
    `usage` and every flag."""
    if any(o in ("-h", "--help") for o in args.options):
        print(usage.rstrip("\n") + "\n\n" + flag_help(model))
        return None
    return parse_config(model, args.options)
