"""Entry point of the `steerable` command: parses arguments, dispatches, maps errors to exit codes."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from importlib import import_module

from steerable import __version__
from steerable.cli.errors import USER_ERROR_EXIT, run_command

# Subcommand modules; each exposes `register(subparsers)`, which adds the command with
# `steerable.cli.flags.add_command`: every command reads its words with `flags.parse_command`.
SUBCOMMANDS = ("info", "make_dataset", "annotate", "sheets", "render", "recipes", "eval", "demo", "export", "view",
               "revisions", "train", "run", "serve_policy", "restore")


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
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # --debug may come anywhere on the line, also after the subcommand.
    debug = "--debug" in argv
    if debug:
        argv.remove("--debug")
    parser = build_parser(next((a for a in argv if not a.startswith("-")), None))
    args, extra = parser.parse_known_args(argv)
    args.options = extra  # the command's own words, read by flags.parse_command
    args.debug = debug
    logging.basicConfig(
        level=logging.DEBUG if debug else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    if getattr(args, "func", None) is None:
        parser.print_help()
        return USER_ERROR_EXIT
    return run_command(args.func, args, debug=debug)  # the one error boundary: one line, exit 2


if __name__ == "__main__":
    sys.exit(main())
