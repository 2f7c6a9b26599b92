"""One spelling for naming a dataset and choosing episodes, whatever the command.

The spelling: the dataset is the positional `DATASET` (a local folder or a Hub repo id) and the
episodes are `--episodes 0,3,7-9`. Every command also accepts the other spellings found across
steerable as aliases, rewritten here before parsing:

- `--dataset D`, `--root D`, `--repo_id D` -> the positional DATASET (info, render, export, eval,
  sheets, view); for `annotate`, a first positional `D` or `--dataset D` -> `--root D` for a local
  folder, else `--repo_id D`;
- `--only_episodes L` -> `--episodes L` (export, render, view); for `annotate`, `--episodes L` ->
  its `--only_episodes L`, and for `train` and `run` (`--replay`) `--episodes L` stays, all with
  ranges expanded (`7-9` -> `7,8,9`).

`train` and `recipes lint` keep their `--dataset` flag (it is their spelling), and `demo` and
`make-dataset` use `--episodes N` for a count, so none of them is rewritten.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from steerable.errors import ConfigError

__all__ = ["normalize_aliases", "parse_episodes"]

POSITIONAL_DATASET = frozenset({"eval"})
EPISODE_LISTS: frozenset[str] = frozenset()
DATASET_ALIASES = ("--dataset", "--root", "--repo_id")


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


def _rename(args: list[str], old: str, new: str) -> list[str]:
    return [new if a == old else new + a[len(old):] if a.startswith(old + "=") else a for a in args]


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
    if command in EPISODE_LISTS:
        tail = _rename(tail, "--only_episodes", "--episodes")
    if command in POSITIONAL_DATASET:
        tail, datasets = _take(tail, DATASET_ALIASES)
        if len({value for _, value in datasets}) > 1:
            raise ConfigError(f"name the dataset once; got {', '.join(f'{n} {v}' for n, v in datasets)}")
        if datasets:
            tail = [datasets[0][1], *tail]
    return head + tail


def parse_episodes(text: str | None, flag: str = "--episodes") -> list[int] | None:
    """`0,3,7-9` -> [0, 3, 7, 8, 9]; None stays None (every episode)."""
    if text is None:
        return None
    out: list[int] = []
    try:
        for part in (p.strip() for p in text.split(",")):
            if not part:
                continue
            lo, dash, hi = part.partition("-")
            first, last = int(lo), int(hi) if dash else int(lo)
            if first < 0 or last < first:
                raise ValueError(part)
            out.extend(range(first, last + 1))
    except ValueError:
        raise ConfigError(f"{flag} takes episode indices and ranges like 0,3,7-9, got {text!r}") from None
    if not out:
        raise ConfigError(f"{flag} names no episode: {text!r}")
    return list(dict.fromkeys(out))
