"""`cli/run.py` hands typed values on (the session, its command lines, the stack): no `Any` at its seams."""

from __future__ import annotations

import inspect

from steerable.cli import run


def test_no_function_of_the_run_command_takes_or_returns_any() -> None:
    loose = [f"{name}: {annotation}" for name, function in inspect.getmembers(run, inspect.isfunction)
             if function.__module__ == run.__name__
             for annotation in (*(p.annotation for p in inspect.signature(function).parameters.values()),
                                inspect.signature(function).return_annotation)
             if "Any" in str(annotation)]
    assert loose == []
