"""Entry point of the `steerable` command: parses arguments, dispatches, maps errors to exit codes."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from importlib import import_module

from steerable import __version__
from steerable.cli._config_file import add_config_flag, expand_config
from steerable.cli._dataset_args import normalize_aliases
from steerable.cli.errors import USER_ERROR_EXIT, run_command
from steerable.errors import SteerableError

# Subcommand modules; each exposes `register(subparsers)` that sets `func` on its parser.
SUBCOMMANDS = ("info", "make_dataset", "annotate", "sheets", "render", "recipes", "eval", "demo", "export", "view", "revisions", "train", "run",
               "serve_policy", "restore")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The `steerable` parser. Given a known subcommand, only that one is registered: running a
    command imports no other command's module, nor what its flags need (pydantic, rich)."""
    parser = argparse.ArgumentParser(
        prog="steerable",
        description="Language annotations, recipes and steering for LeRobot v3 datasets.",
    )
    parser.add_argument("--version", action="version", version=f"steerable {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks and debug logs")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    module = command.replace("-", "_") if command and "_" not in command else ""  # make-dataset: make_dataset
    for name in (module,) if module in SUBCOMMANDS else SUBCOMMANDS:
        import_module(f"steerable.cli.{name}").register(sub)
    add_config_flag(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # --debug may come anywhere on the line, also after the subcommand.
    debug = "--debug" in argv
    if debug:
        argv.remove("--debug")
    parser = build_parser(next((a for a in argv if not a.startswith("-")), None))
    try:
        argv = normalize_aliases(argv)  # --dataset/--root/--only_episodes...: one spelling per command
        argv = expand_config(parser, argv)  # --config FILE.yaml of an argparse command: its options
    except SteerableError as exc:
        print(f"steerable: error: {exc}", file=sys.stderr)
        return USER_ERROR_EXIT
    args, extra = parser.parse_known_args(argv)
    if extra and not getattr(args, "pass_through", False):
        _unrecognized(parser, args.command, extra)
    args.options = [*getattr(args, "options", []), *extra]
    args.debug = debug
    logging.basicConfig(
        level=logging.DEBUG if debug else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    if getattr(args, "func", None) is None:
        parser.print_help()
        return USER_ERROR_EXIT
    return run_command(args.func, args, debug=debug)  # the one error boundary: one line, exit 2


def _unrecognized(parser: argparse.ArgumentParser, command: str | None, extra: list[str]) -> None:
    """Exit 2 naming the unknown flags, with the command's own usage and the closest known flag."""
    import difflib

    target = parser
    for action in parser._subparsers._group_actions if parser._subparsers else []:
        choices = getattr(action, "choices", None)
        if isinstance(choices, dict) and command in choices:
            target = choices[command]
    known = [o for a in target._actions for o in a.option_strings if o.startswith("--")]
    hints = []
    for flag in (e.split("=", 1)[0] for e in extra if e.startswith("-")):
        close = difflib.get_close_matches(flag, known, n=1, cutoff=0.75)
        if close:
            hints.append(f"{flag}: did you mean {close[0]}?")
    target.error(f"unrecognized arguments: {' '.join(extra)}" + (f" ({'; '.join(hints)})" if hints else ""))


if __name__ == "__main__":
    sys.exit(main())
