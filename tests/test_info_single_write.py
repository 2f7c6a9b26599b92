"""info.json edited through one typed model and written once per transaction (#38).

A review save used to write info.json twice in one folder commit (the language writer, then the
review step that read it back and rewrote it); the model (`steerable.dataset.info.DatasetInfo`) now
carries every edit, and the bytes are what the raw-dict edit wrote before (LeRobot's indent of 4,
the file's keys in its order, nothing added), for the real LeRobot fixtures too.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import steerable.dataset.atomic as atomic
from steerable.dataset import LeRobotDataset
from steerable.dataset.info import load_info, write_info
from steerable.dataset.layout import INFO_PATH, PROVENANCE_KEY, PROVENANCE_PATH
from steerable.dataset.review import episode_rows, save_episode
from steerable.dataset.writer import EpisodeLanguage, write_language
from steerable.language import SAY_TOOL, language_feature_info, merge_tools
from test_viewer_edit import copy_dataset

FIXTURES = Path("/work/shared/data")


@pytest.fixture
def info_writes(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Path]]:
    """Every atomic write of a file named info.json, in order (the one write path of JSON files)."""
    seen: list[Path] = []
    original = atomic.atomic_write_bytes

    def counting(target: Path, data: bytes, **kwargs: Any) -> None:
        if Path(target).name == "info.json":
            seen.append(Path(target))
        original(target, data, **kwargs)

    monkeypatch.setattr(atomic, "atomic_write_bytes", counting)
    yield seen


def lerobot_bytes(info: dict[str, Any]) -> bytes:
    """info.json as LeRobot writes it (json, indent 4, UTF-8 kept), and a final newline."""
    return (json.dumps(info, indent=4, ensure_ascii=False) + "\n").encode("utf-8")


def edited_rows(ds: LeRobotDataset, episode: int) -> list[dict[str, Any]]:
    """The episode's persistent rows with its first subtask retyped."""
    rows = [dict(r) for r in episode_rows(ds, episode).persistent]
    first = next(r for r in rows if r.get("style") == "subtask")
    first["content"] = f"{first['content']} (corrected)"
    return rows


def test_a_review_save_writes_info_json_once(viewer_ds: Path, tmp_path: Path, info_writes: list[Path]) -> None:
    ds = LeRobotDataset(copy_dataset(viewer_ds, tmp_path / "ds"))
    before = (ds.root / INFO_PATH).read_bytes()
    assert save_episode(ds, 1, edited_rows(ds, 1), None, status="reviewed") is not None
    assert len(info_writes) == 1  # was 2: the writer, then the review step again
    assert (ds.root / INFO_PATH).read_bytes() == before  # language already declared: the same bytes
    info_writes.clear()
    assert save_episode(ds, 2, None, None, status="needs work") is not None  # a status only
    assert len(info_writes) == 1


def test_a_review_save_moves_an_older_key_out_in_the_same_single_write(
    viewer_ds: Path, tmp_path: Path, info_writes: list[Path]
) -> None:
    root = copy_dataset(viewer_ds, tmp_path / "ds")
    raw = json.loads((root / INFO_PATH).read_text(encoding="utf-8"))
    older = {**raw, PROVENANCE_KEY: {"producers": {"subtask": "old-model"}, "human": {"plan": [0]}}}
    (root / INFO_PATH).write_bytes(lerobot_bytes(older))
    ds = LeRobotDataset(root)
    assert save_episode(ds, 1, edited_rows(ds, 1), None) is not None
    assert len(info_writes) == 1
    assert (root / INFO_PATH).read_bytes() == lerobot_bytes(raw)  # the key gone, nothing else changed
    block = json.loads((root / PROVENANCE_PATH).read_text(encoding="utf-8"))
    assert block["producers"] == {"subtask": "old-model"}
    assert block["human"]["plan"] == [0] and 1 in block["human"]["subtask"]


@pytest.mark.parametrize("name", ["so101_record_test", "lingzu_teleop_4"])
def test_the_language_write_gives_the_bytes_of_the_raw_edit_on_lerobots_fixtures(
    name: str, tmp_path: Path, info_writes: list[Path]
) -> None:
    source = FIXTURES / name
    if not source.is_dir():
        pytest.skip(f"{source} is not here")
    root = tmp_path / name
    shutil.copytree(source, root, ignore=shutil.ignore_patterns("videos"))
    raw = json.loads((root / INFO_PATH).read_text(encoding="utf-8"))
    write_info(root, load_info(root))  # a round trip through the model keeps every byte (but a final newline)
    assert (root / INFO_PATH).read_bytes().rstrip(b"\n") == (source / INFO_PATH).read_bytes().rstrip(b"\n")
    info_writes.clear()
    ds = LeRobotDataset(root)
    write_language(ds, {0: EpisodeLanguage()})
    assert len(info_writes) == 1
    expected = {**raw, "features": {**raw["features"], **language_feature_info()}}
    expected["tools"] = merge_tools(raw.get("tools"), [SAY_TOOL])
    assert (root / INFO_PATH).read_bytes() == lerobot_bytes(expected)
