"""What walk 3 of a `view --edit` save found defined twice (#38), each now defined once: one reader of an
episode's language (C1), the review status carried as its Literal (C2), the save's folder commit through
`commit_folder` (C3), and the rows of a save checked once (C4)."""

from __future__ import annotations

import ast
import errno
import inspect
from collections.abc import Mapping
from pathlib import Path
from typing import Any, get_type_hints

import pytest

import steerable.dataset.review as review
import steerable.dataset.review_records as review_records
import steerable.dataset.summary as summary
import steerable.dataset.writer as writer
import steerable.viewer.site as site
from steerable.dataset import LeRobotDataset
from steerable.dataset.episode_language import episode_rows, rows_in_file
from steerable.dataset.review import restore_revision, save_episode
from steerable.dataset.review_records import ReviewStatus, checked_review_status
from steerable.dataset.revisions import record_revision
from steerable.dataset.writer import EpisodeLanguage, write_language
from steerable.errors import ConfigError, LanguageSchemaError, WriteError
from steerable.viewer.episodes import episode_language
from test_viewer_edit import copy_dataset, dataset_state


@pytest.fixture
def ds(viewer_ds: Path, tmp_path: Path) -> LeRobotDataset:
    return LeRobotDataset(copy_dataset(viewer_ds, tmp_path / "ds"))


# -- C1: one reader of an episode's language ------------------------------------------------------


def test_the_save_the_diff_the_writer_and_the_viewer_read_the_language_through_one_reader() -> None:
    """None of them decodes the language cells itself any more (each did, with its own zip of stamps)."""
    for source in (inspect.getsource(review), inspect.getsource(writer), inspect.getsource(episode_language)):
        assert "persistent_rows_from_arrow" not in source and "event_rows_from_arrow" not in source


def test_the_viewer_page_and_a_snapshot_read_what_the_save_reads(ds: LeRobotDataset) -> None:
    rows = episode_rows(ds, 1)
    assert rows.persistent and rows.events, "the fixture's episode 1 has rows of both columns"
    persistent, events, stamps = episode_language(ds, ds.episode(1))
    assert persistent == rows.persistent
    assert [(e["t"], r) for e in events for r in e["rows"]] == rows.events
    frames = ds.read_episode(1, ["frame_index"]).column("frame_index").to_pylist()
    assert all(e["rows"] and frames[e["frame"]] == e["frame"] for e in events)  # the frame, as the page counts
    assert [e["t"] for e in events] == [float(stamps[e["frame"]]) for e in events]
    assert len({e["frame"] for e in events}) == len(events)  # one entry per frame
    in_file = rows_in_file(ds.data_path(ds.episode(1)), 1)
    assert (in_file.persistent, in_file.events) == (rows.persistent, rows.events)


# -- C2: the review status as its Literal -----------------------------------------------------------


def test_the_status_is_carried_as_the_literal_through_the_save() -> None:
    assert get_type_hints(save_episode)["status"] == ReviewStatus | None
    assert get_type_hints(review_records.with_review)["status"] == ReviewStatus | None
    assert get_type_hints(review_records.block_review)["return"] == dict[int, ReviewStatus]
    assert get_type_hints(review.review_status)["return"] == dict[int, ReviewStatus]
    assert get_type_hints(record_revision)["status"] == Mapping[int, ReviewStatus] | None


def test_the_status_names_are_spelled_once() -> None:
    """Once each, in the Literal; the other modules use its constants."""
    found: dict[str, int] = {}
    for module in (review, review_records, summary, site):
        for node in ast.walk(ast.parse(inspect.getsource(module))):
            if isinstance(node, ast.Constant) and node.value in ("unreviewed", "reviewed"):
                found[node.value] = found.get(node.value, 0) + 1
    assert found == {"unreviewed": 1, "reviewed": 1}


def test_a_status_outside_the_literal_is_refused_at_the_boundary_in_one_wording(ds: LeRobotDataset) -> None:
    before = dataset_state(ds.root)
    with pytest.raises(ConfigError) as caught:
        save_episode(ds, 1, None, None, status="bogus")  # type: ignore[arg-type]  # an untyped caller
    with pytest.raises(ConfigError) as direct:
        checked_review_status("bogus")
    assert str(caught.value) == str(direct.value) == (
        "review status 'bogus' is not one of unreviewed, reviewed, needs work"
    )
    assert dataset_state(ds.root) == before


# -- C3: one folder commit, one error type ----------------------------------------------------------


def _disk_full(*args: Any, **kwargs: Any) -> Any:
    raise OSError(errno.ENOSPC, "No space left on device")


def test_a_failing_write_inside_a_save_leaves_the_folder_and_raises_a_write_error(
    ds: LeRobotDataset, monkeypatch: pytest.MonkeyPatch
) -> None:
    stored = episode_rows(ds, 1)
    before = dataset_state(ds.root)
    monkeypatch.setattr(review, "record_revision", _disk_full)
    with pytest.raises(WriteError, match=str(ds.root)):
        save_episode(ds, 1, stored.persistent[1:], None)
    with pytest.raises(WriteError, match=str(ds.root)):
        save_episode(ds, 2, None, None, status="reviewed")
    assert dataset_state(ds.root) == before


def test_a_failing_write_inside_a_restore_leaves_the_folder_and_raises_a_write_error(
    ds: LeRobotDataset, monkeypatch: pytest.MonkeyPatch
) -> None:
    stored = episode_rows(ds, 1)
    assert save_episode(ds, 1, stored.persistent[1:], None) is not None
    before = dataset_state(ds.root)
    monkeypatch.setattr(review, "record_revision", _disk_full)
    with pytest.raises(WriteError, match=str(ds.root)):
        restore_revision(ds, 0)
    assert dataset_state(ds.root) == before


# -- C4: the rows of a save checked once --------------------------------------------------------------


def test_a_save_checks_its_rows_once_and_any_other_writer_still_checks(
    ds: LeRobotDataset, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []

    def counted(name: str, check: Any) -> Any:
        def run(*args: Any, **kwargs: Any) -> Any:
            calls.append(name)
            return check(*args, **kwargs)

        return run

    monkeypatch.setattr(review, "validate_rows", counted("review", review.validate_rows))
    monkeypatch.setattr(writer, "validate_rows", counted("writer", writer.validate_rows))
    stored = episode_rows(ds, 1)
    assert save_episode(ds, 1, stored.persistent[1:], None) is not None
    assert calls == ["review"]
    bad = dict(stored.persistent[0], style="subtsk")
    before = dataset_state(ds.root)
    with pytest.raises(LanguageSchemaError, match="episode 1"):
        write_language(ds, {1: EpisodeLanguage([bad], stored.events)})  # type: ignore[list-item]
    assert calls == ["review", "writer"]
    assert dataset_state(ds.root) == before
