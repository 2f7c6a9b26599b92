"""The dataset and episode spellings of annotate, train and run, whose settings live outside cli/.

The other commands read them as field aliases (`steerable.cli.options`); these three are rewritten
here before parsing: for `annotate`, a first positional `D` or `--dataset D` -> `--root D` for a
local folder, else `--repo_id D`, and `--episodes L` -> its `--only_episodes L`; for `train` and
`run` (`--replay`), `--only_episodes L` -> `--episodes L`; all with ranges expanded (`7-9` ->
`7,8,9`), as their settings take a list. `train` keeps its `--dataset` flag (it is its spelling).
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from steerable.cli.options import parse_episodes

__all__ = ["normalize_aliases"]


def _take(args: list[str], names: Sequence[str]) -> tuple[list[str], list[tuple[str, str]]]:
    """Remove every `NAME VALUE` / `NAME=VALUE` for NAME in names; return the rest and the (name, value)s."""
    rest: list[str] = []
    taken: list[tuple[str, str]] = []
    i = 0
    while i < len(args):
        arg = args[i]
        name, eq, value = arg.partition("=")
        if name in names and eq:
            taken.append((name, value))
        elif arg in names and i + 1 < len(args):
            taken.append((arg, args[i + 1]))
            i += 1
        else:
            rest.append(arg)
        i += 1
    return rest, taken


def normalize_aliases(argv: list[str]) -> list[str]:
    """`argv` with the alias spellings of dataset and episode selection rewritten to each command's own."""
    position = next((i for i, a in enumerate(argv) if not a.startswith("-")), None)
    if position is None:
        return argv
    command, head, tail = argv[position], argv[: position + 1], argv[position + 1 :]
    if command == "annotate":
        tail, datasets = _take(tail, ("--dataset",))
        if tail and not tail[0].startswith("-"):  # `annotate DATASET ...`: the positional spelling
            datasets.append(("DATASET", tail.pop(0)))
        for _, value in datasets:
            tail = [("--root" if os.path.exists(value) else "--repo_id"), value, *tail]
        tail, picks = _take(tail, ("--episodes", "--only_episodes"))
        for flag, value in picks:  # ranges (7-9) expanded here: annotate's config takes a list
            tail += ["--only_episodes", ",".join(str(i) for i in parse_episodes(value, flag) or [])]
        return head + tail
    if command in ("train", "run"):  # ranges expanded: the training and run settings take a list
        tail, picks = _take(tail, ("--episodes", "--only_episodes"))
        for flag, value in picks:
            tail += ["--episodes", ",".join(str(i) for i in parse_episodes(value, flag) or [])]
        return head + tail
    return argv
