"""Episode indices as runs of text ("0-2, 5"): one short line however many episodes a message or a
record names. Below `summary` (which re-exports it), `lineage` and `provenance`, so each imports it one way."""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["index_ranges"]


def index_ranges(indices: Iterable[int], sep: str = ", ") -> str:
    """[0, 1, 2, 5, 7, 8] -> '0-2, 5, 7-8' (`sep` between runs; the provenance file uses ",")."""
    runs: list[list[int]] = []
    for i in sorted(set(indices)):
        if runs and i == runs[-1][1] + 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    return sep.join(str(a) if a == b else f"{a}-{b}" for a, b in runs)
