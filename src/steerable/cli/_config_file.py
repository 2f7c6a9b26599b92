"""`--config FILE.yaml` for the argparse commands (info, render, export, eval, view...).

The file's keys are the command's option names (`json: true`, `episodes: 0,3`). It is rewritten into
those options, placed ahead of the command line's own, so argparse checks every value as it checks
the typed option, and an option given on the command line too wins (the later one counts; a
repeatable option such as `--camera_map` adds up). The commands built on a settings tree (annotate,
train, run, serve-policy, make-dataset) read `--config` themselves, through `steerable.cli.flags`.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from steerable.errors import ConfigError

__all__ = ["add_config_flag", "expand_config"]

CONFIG_FLAG = "--config"


def _commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def add_config_flag(parser: argparse.ArgumentParser) -> None:
    """List `--config FILE.yaml` in the help of every argparse command (and verb) below `parser`."""
    seen: set[int] = set()
    for command in _commands(parser).values():
        if id(command) in seen or command.get_default("pass_through"):
            continue
        seen.add(id(command))
        if _commands(command):
            add_config_flag(command)
        else:
            command.add_argument(CONFIG_FLAG, metavar="FILE.yaml",
                                 help="options from a YAML file (keys as the option names); options given too win")


def _command(parser: argparse.ArgumentParser, argv: Sequence[str]) -> tuple[argparse.ArgumentParser | None, int]:
    """The (sub)command `argv` runs and the position of its name (None, -1 for no command)."""
    node: argparse.ArgumentParser | None = None
    at = -1
    choices = _commands(parser)
    for i, arg in enumerate(argv):
        if not choices:
            break
        if arg.startswith("-"):
            continue
        node, at = choices.get(arg), i
        if node is None:
            return None, -1
        choices = _commands(node)
    return node, at


def expand_config(parser: argparse.ArgumentParser, argv: list[str]) -> list[str]:
    """`argv` with `--config FILE.yaml` replaced by the options the file sets (see the module docstring)."""
    i = next((n for n, a in enumerate(argv) if a == CONFIG_FLAG or a.startswith(CONFIG_FLAG + "=")), None)
    if i is None:
        return argv
    inline = argv[i].startswith(CONFIG_FLAG + "=")
    value = argv[i].partition("=")[2] if inline else (argv[i + 1] if i + 1 < len(argv) else "")
    rest = argv[:i] + argv[i + (1 if inline else 2):]
    command, at = _command(parser, rest)
    if command is None or command.get_default("pass_through"):
        return argv  # no command (argparse says so), or one that reads --config itself
    if not value or value.startswith("-"):
        raise ConfigError(f"{CONFIG_FLAG} needs a file path")
    from steerable.cli.flags import load_yaml

    path = Path(value)
    return rest[: at + 1] + _options(command, load_yaml(path), path) + rest[at + 1:]


def _options(command: argparse.ArgumentParser, data: Mapping[str, Any], path: Path) -> list[str]:
    """The command-line options that say what `data` (a config file's mapping) says."""
    from steerable.cli.flags import suggest

    actions = {
        option[2:]: action for action in command._actions for option in action.option_strings
        if option.startswith("--") and option not in ("--help", CONFIG_FLAG)
    }
    out: list[str] = []
    for key, value in data.items():
        action = actions.get(str(key))
        if action is None:
            raise ConfigError(f"{path}: unknown key {key}{suggest(str(key), actions, '')}")
        flag = f"--{key}"
        if action.nargs == 0:  # a switch (store_true...): on when the file gives its value
            if not isinstance(value, bool):
                raise ConfigError(f"{path}: {key} is a switch: true or false, got {value!r}")
            out += [flag] if value == action.const else []
        elif value is None:
            continue
        elif isinstance(value, list) and isinstance(action, argparse._AppendAction):
            for item in value:
                out += [flag, str(item)]
        elif isinstance(value, list):
            out += [flag, ",".join(str(item) for item in value)]
        else:
            out += [flag, str(value)]
    return out
