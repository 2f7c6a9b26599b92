"""The one error boundary of the `steerable` command: a user-fixable failure is one line, exit 2.

`run_command` calls a subcommand and maps what escapes it:

- `SteerableError`: its message (they are written to be shown);
- `OSError` (read-only or full disk, a path through a file, too many open files...): the path and
  what to do, from `steerable.errors.explain_os_error`;
- malformed JSON and pyarrow's errors on a file: their message;
- Ctrl-C: "steerable: interrupted", exit 130; SIGTERM or SIGHUP, which act as Ctrl-C: "steerable:
  terminated (SIGTERM)", exit 128 + the signal;
- a closed output pipe (`steerable recipes show hirobot | head`): silence, exit 141 (128 + SIGPIPE,
  what a shell reports for a tool that a closed pipe stops), with stdout sent to /dev/null so
  the interpreter's final flush does not fail again (Python's recommended handling).

Anything else is a bug and keeps its traceback; `--debug` shows the traceback for everything (a
user error still exits 2).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from collections.abc import Callable

from steerable.errors import SteerableError, explain_os_error, os_cause
from steerable.processes import Termination, interrupt_on_termination

__all__ = ["BROKEN_PIPE_EXIT", "INTERRUPTED_EXIT", "USER_ERROR_EXIT", "run_command", "user_message"]

USER_ERROR_EXIT = 2
BROKEN_PIPE_EXIT = 141
INTERRUPTED_EXIT = 130


def run_command(func: Callable[[argparse.Namespace], int | None], args: argparse.Namespace, *, debug: bool) -> int:
    """Run one subcommand; returns its exit status. SIGTERM and SIGHUP stop it as Ctrl-C does, so
    every clean-up runs (pool workers, vLLM replicas, a Ray cluster end with it), then exit 128 + the
    signal (143 for SIGTERM) with one line."""
    with interrupt_on_termination() as stopped:
        code = _run(func, args, debug, stopped)
    if stopped.signum is not None and code == INTERRUPTED_EXIT:  # the command caught the interrupt itself
        return 128 + stopped.signum
    return code


def _run(func: Callable[[argparse.Namespace], int | None], args: argparse.Namespace, debug: bool,
         stopped: Termination) -> int:
    try:
        code = int(func(args) or 0)
        sys.stdout.flush()  # a reader that closed the pipe early shows up here at the latest
        return code
    except KeyboardInterrupt:
        print(f"steerable: terminated ({stopped.name})" if stopped.signum else "steerable: interrupted",
              file=sys.stderr)
        return INTERRUPTED_EXIT
    except SystemExit as exc:
        if _broken_pipe(exc):  # rich's console answers a closed pipe with SystemExit(1)
            _silence_stdout()
            return BROKEN_PIPE_EXIT
        raise
    except Exception as exc:
        if _broken_pipe(exc):
            _silence_stdout()
            return BROKEN_PIPE_EXIT
        message = user_message(exc)
        if message is None:
            raise
        if debug:  # the traceback too, but a user error keeps its status
            traceback.print_exc()
        print(f"steerable: error: {message}", file=sys.stderr)
        return USER_ERROR_EXIT


def user_message(exc: BaseException) -> str | None:
    """The one line shown for `exc`, or None when it is a bug (keep the traceback)."""
    if isinstance(exc, SteerableError):
        return str(exc)
    if (cause := os_cause(exc)) is not None:  # also one a library wraps, as `datasets` does
        return explain_os_error(cause)
    if isinstance(exc, json.JSONDecodeError):
        return f"invalid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})"
    if type(exc).__module__.startswith("pyarrow") and str(exc):
        return f"{str(exc).splitlines()[0]} (pyarrow; run with --debug for details)"
    return None


def _broken_pipe(exc: BaseException | None) -> bool:
    while exc is not None:
        if isinstance(exc, BrokenPipeError):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def _silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
