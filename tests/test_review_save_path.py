"""The `view --edit` save path, each step once (#38): `rows_to_save` fills the column a save did not
send and checks the rows (one validation, one error), and a status-only save writes its metadata
through the writer's step (`update_info`), as a save of rows does; the provenance block that crosses
the dataset modules is one TypedDict (`ProvenanceBlock`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import steerable.dataset.review as review
from steerable.dataset import LeRobotDataset
from steerable.dataset.layout import PROVENANCE_PATH
from steerable.dataset.provenance import ProvenanceBlock, read_provenance_file
from steerable.dataset.review import episode_rows, review_status, rows_to_save, save_episode
from steerable.errors import LanguageSchemaError
from steerable.language.schema import EVENT_ROW_FIELDS, PERSISTENT_ROW_FIELDS
from test_viewer_edit import copy_dataset, dataset_state


@pytest.fixture
def ds(viewer_ds: Path, tmp_path: Path) -> LeRobotDataset:
    return LeRobotDataset(copy_dataset(viewer_ds, tmp_path / "ds"))


def test_a_column_not_sent_keeps_its_stored_rows_and_the_rows_come_back_typed(ds: LeRobotDataset) -> None:
    stored = episode_rows(ds, 1)
    assert stored.events, "the fixture's episode 1 has events"
    t, first = stored.events[0]
    sent = [(t, {k: v for k, v in first.items() if v is not None})]  # the page may leave null fields out
    rows = rows_to_save(ds, 1, None, sent)
    assert rows.persistent == stored.persistent  # the column not sent: as stored
    assert rows.events == [(t, first)]  # every field back, an absent one None
    assert all(list(r) == list(EVENT_ROW_FIELDS) for _, r in rows.events)
    assert all(set(r) == set(PERSISTENT_ROW_FIELDS) for r in rows.persistent)
    assert rows_to_save(ds, 1, stored.persistent, None).events == stored.events


def test_the_rows_are_checked_once_and_every_problem_named(ds: LeRobotDataset) -> None:
    stored = episode_rows(ds, 1)
    bad: list[dict[str, Any]] = [dict(r) for r in stored.persistent]
    bad[0]["style"] = "subtsk"
    bad[1]["mood"] = "cheerful"  # an unknown field is reported, not dropped by the typing
    before = dataset_state(ds.root)
    with pytest.raises(LanguageSchemaError) as caught:
        save_episode(ds, 1, bad, None)
    first, *problems = str(caught.value).splitlines()
    assert first.startswith("2 problems in language rows") and len(problems) == 2, str(caught.value)
    assert "subtsk" in problems[0] and "mood" in problems[1]
    assert dataset_state(ds.root) == before


def test_a_status_save_writes_its_metadata_through_update_info(
    ds: LeRobotDataset, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[dict[str, Any]] = []
    original = review.update_info

    def spy(*args: Any, **kwargs: Any) -> None:
        calls.append(kwargs)
        original(*args, **kwargs)

    monkeypatch.setattr(review, "update_info", spy)
    assert save_episode(ds, 2, None, None, status="needs work") is not None
    assert calls == [{"rows": False}]
    assert review_status(LeRobotDataset(ds.root)) == {2: "needs work"}


def test_the_provenance_block_has_one_typed_shape_and_keeps_keys_of_others(ds: LeRobotDataset) -> None:
    path = ds.root / PROVENANCE_PATH
    written = read_provenance_file(ds.root)
    assert written is not None
    path.write_text(json.dumps({**written, "note": "another tool's key"}), encoding="utf-8")
    rows = episode_rows(ds, 1)
    persistent = [dict(r, content="a person's subtask") if r["style"] == "subtask" else r for r in rows.persistent]
    assert save_episode(LeRobotDataset(ds.root), 1, persistent, None, status="reviewed") is not None
    block = read_provenance_file(ds.root)
    assert block is not None and block.get("note") == "another tool's key"
    assert set(block) - {"note"} <= ProvenanceBlock.__optional_keys__
    assert block.get("human") == {"subtask": [1]} and block.get("review") == {"1": "reviewed"}
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in block.get("producers", {}).items())
