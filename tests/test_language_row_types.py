"""Language rows are typed from where they are built to where they are written (issue #38).

Every builder of an episode's language (the synthetic oracle, the Meta-World phases, the recorder,
`annotate`) makes `PersistentRow` / `EventRow` rows through the constructors of `steerable.language`,
and `EpisodeLanguage` takes only those: every row carries every field of its column.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import get_type_hints

import numpy as np

from steerable.dataset.writer import EpisodeLanguage
from steerable.language import (
    EVENT_ROW_FIELDS,
    PERSISTENT_ROW_FIELDS,
    EventRow,
    PersistentRow,
    checked_event_row,
    checked_persistent_row,
    event_row,
    persistent_row,
    speech_row,
    validate_rows,
)
from steerable.synthetic.generate import record_episode
from steerable.synthetic.metaworld import episode_language as phase_language
from steerable.synthetic.oracle import episode_language as oracle_language


def test_episode_language_takes_typed_rows_only() -> None:
    hints = get_type_hints(EpisodeLanguage)
    assert hints["persistent"] == Sequence[PersistentRow]
    assert hints["events"] == Sequence[tuple[float, EventRow]]


def test_the_constructors_give_every_field_of_their_column() -> None:
    plan = persistent_row(role="assistant", content="1. go", style="plan", timestamp=0.5)
    ask = event_row(role="user", content="where?", style="vqa", camera="observation.images.top")
    assert list(plan) == list(PERSISTENT_ROW_FIELDS) and plan["camera"] is None and plan["tool_calls"] is None
    assert list(ask) == list(EVENT_ROW_FIELDS) and ask["camera"] == "observation.images.top"
    say = speech_row("on my way")
    assert say == event_row(role="assistant", content=None, style=None, tool_calls=[
        {"type": "function", "function": {"name": "say", "arguments": {"text": "on my way"}}}
    ])
    assert validate_rows([plan], [(0.5, say)], frame_timestamps=np.array([0.5], dtype=np.float32)) == []


def test_a_checked_row_keeps_its_columns_fields_only() -> None:
    sent = {"role": "user", "content": "stop", "style": "interjection", "note": "not a field"}
    assert checked_event_row(sent) == event_row(role="user", content="stop", style="interjection")
    stored = checked_persistent_row({"role": "user", "content": "go", "style": "task_aug", "timestamp": 1.0})
    assert stored == persistent_row(role="user", content="go", style="task_aug", timestamp=1.0)


def test_the_synthetic_builders_make_whole_rows() -> None:
    task, _, truth = record_episode(11, 0, 15, "easy", 1.0, [])
    oracle = oracle_language(task, truth, np.random.default_rng(0))
    phases = phase_language([(0, "reach the puck"), (4, "push it")], [i / 10 for i in range(8)])
    assert oracle.events and oracle.persistent and phases.persistent
    for lang in (oracle, phases):
        assert all(list(row) == list(PERSISTENT_ROW_FIELDS) for row in lang.persistent)
        assert all(set(row) == set(EVENT_ROW_FIELDS) for _, row in lang.events)
