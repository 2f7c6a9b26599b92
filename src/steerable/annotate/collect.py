"""From staged module rows to what the writer takes, with every check done first."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from steerable.errors import LanguageSchemaError
from steerable.language.styles import LANGUAGE_PERSISTENT, column_for_style
from steerable.language.validate import validate_rows

__all__ = ["EpisodeRows", "ModuleCheck", "split_rows", "validate_episode"]

# A module-specific check: (all staged rows of the episode, the episode's context facts) -> messages.
ModuleCheck = Callable[[list[dict[str, Any]], Mapping[str, Any]], list[str]]


@dataclass
class EpisodeRows:
    episode_index: int
    persistent: list[dict[str, Any]] = field(default_factory=list)
    events: list[tuple[float, dict[str, Any]]] = field(default_factory=list)


def split_rows(episode_index: int, staged: Iterable[list[dict[str, Any]]]) -> EpisodeRows:
    """Route staged rows to their column; event rows lose `timestamp` (the frame carries it)."""
    out = EpisodeRows(episode_index)
    for rows in staged:
        for row in rows:
            if _column(row) == LANGUAGE_PERSISTENT:
                out.persistent.append(dict(row))
            else:
                event = {k: v for k, v in row.items() if k != "timestamp"}
                out.events.append((float(row["timestamp"]), event))
    return out


def _column(row: Mapping[str, Any]) -> str:
    # An unknown style stays persistent here; the validator then reports it with its row.
    try:
        return column_for_style(row.get("style"))
    except LanguageSchemaError:
        return LANGUAGE_PERSISTENT


def validate_episode(
    rows: EpisodeRows,
    staged_rows: list[dict[str, Any]],
    *,
    frame_timestamps: np.ndarray,
    cameras: list[str],
    checks: Iterable[ModuleCheck] = (),
    facts: Mapping[str, Any] | None = None,
) -> list[str]:
    """Every problem of one episode's rows, as 'row: reason' strings (empty when writable)."""
    problems = [
        str(p)
        for p in validate_rows(
            rows.persistent, rows.events, frame_timestamps=frame_timestamps, cameras=cameras
        )
    ]
    for check in checks:
        problems += check(staged_rows, facts or {})
    return problems
