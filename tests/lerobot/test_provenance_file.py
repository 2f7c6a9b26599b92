"""Issue 34 item 16: steerable's provenance lives in meta/steerable_provenance.json, not in info.json.

LeRobot 0.6's `DatasetInfo` logs "Unknown fields in DatasetInfo: ['steerable']" for the key older
steerable versions wrote into info.json, on every load of the dataset. Every steerable writer
(`make-dataset --with_language`, `annotate`, a review save, `restore`) now writes the file only; a
dataset with the old key still reads the same in steerable, and its next write moves the key to the
file (the key, when still there, is the newest write: it wins over the file).
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import shutil
from pathlib import Path

import pytest
from lerobot.datasets import LeRobotDataset as LeRobotsDataset

from steerable.cli.main import main
from steerable.dataset import LeRobotDataset
from steerable.dataset.provenance import read_provenance, recorded_producers
from steerable.dataset.review import review_status, save_episode

PROVENANCE = "meta/steerable_provenance.json"
UNKNOWN = "Unknown fields in DatasetInfo"


def steerable(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def lerobot_warnings(root: Path, caplog: pytest.LogCaptureFixture) -> list[str]:
    """What LeRobot logs at WARNING and above while it loads the dataset and reads a frame."""
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        dataset = LeRobotsDataset("local/steerable", root=root)
        assert "language_persistent" in dataset[0]
    return [r.getMessage() for r in caplog.records if UNKNOWN in r.getMessage()]


@pytest.fixture(scope="module")
def annotated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every steerable writer has been through it: make-dataset's oracle rows, annotate, a review save."""
    root = tmp_path_factory.mktemp("provenance_file") / "ds"
    code, _, err = steerable("make-dataset", "synthetic", "--out", str(root), "--episodes", "2", "--fps", "5",
                             "--with_language", "--cameras", "top")
    assert code == 0, err
    code, _, err = steerable("annotate", "--root", str(root), "--executor.progress", "false")
    assert code == 0, err
    save_episode(LeRobotDataset(root), 1, None, None, status="reviewed")
    return root


def as_older_steerable(source: Path, dest: Path, *, file: bool) -> dict:
    """A copy as an older steerable left it: the block in info.json's "steerable" key (and, with
    `file`, the file too); returns the block."""
    shutil.copytree(source, dest)
    block = json.loads((dest / PROVENANCE).read_text())
    info = json.loads((dest / "meta/info.json").read_text())
    info["steerable"] = block
    (dest / "meta/info.json").write_text(json.dumps(info, indent=4))
    if not file:
        (dest / PROVENANCE).unlink()
    return block


def test_lerobot_loads_an_annotated_dataset_without_a_warning(
    annotated: Path, caplog: pytest.LogCaptureFixture
) -> None:
    assert "steerable" not in json.loads((annotated / "meta/info.json").read_text())
    block = json.loads((annotated / PROVENANCE).read_text())
    assert block["producers"]["motion"] == "heuristic:motion" and block["review"] == {"1": "reviewed"}
    assert lerobot_warnings(annotated, caplog) == []


def test_a_dataset_with_the_old_key_reads_the_same_and_its_next_write_moves_it(
    annotated: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    old = tmp_path / "old"
    block = as_older_steerable(annotated, old, file=False)
    assert lerobot_warnings(old, caplog)  # what every LeRobot user saw before: the test can see it
    ds = LeRobotDataset(old)
    assert recorded_producers(old, ds.info) == block["producers"] and review_status(ds) == {1: "reviewed"}
    code, out, err = steerable("info", str(old), "--json")
    assert code == 0 and json.loads(out)["producers"] == block["producers"]
    assert json.loads(out)["missing_metadata"] == []
    save_episode(ds, 0, None, None, status="needs work")  # the next write
    assert "steerable" not in json.loads((old / "meta/info.json").read_text())
    moved = json.loads((old / PROVENANCE).read_text())
    assert moved == {**block, "review": {"0": "needs work", "1": "reviewed"}}
    assert lerobot_warnings(old, caplog) == []


def test_restore_moves_the_old_key_too(annotated: Path, tmp_path: Path) -> None:
    old = tmp_path / "old"
    block = as_older_steerable(annotated, old, file=False)
    code, _, err = steerable("restore", str(old))
    assert code == 0, err
    assert "steerable" not in json.loads((old / "meta/info.json").read_text())
    assert json.loads((old / PROVENANCE).read_text()) == block


def test_with_both_the_key_wins_everywhere_until_a_write_moves_it(annotated: Path, tmp_path: Path) -> None:
    """An older steerable that wrote only the key, after the file was written: the key is newer."""
    both = tmp_path / "both"
    block = as_older_steerable(annotated, both, file=True)
    stale = {**block, "producers": {**block["producers"], "motion": "heuristic:older"}}
    (both / PROVENANCE).write_text(json.dumps(stale))
    ds = LeRobotDataset(both)
    assert recorded_producers(both, ds.info)["motion"] == "heuristic:motion"
    assert read_provenance(both, ds.info).producer("motion", 0) == "heuristic:motion"
    code, out, _ = steerable("info", str(both), "--json")
    assert code == 0 and json.loads(out)["producers"]["motion"] == "heuristic:motion"
    code, _, err = steerable("annotate", "--root", str(both), "--executor.progress", "false", "--include_reviewed",
                             "true")
    assert code == 0, err
    assert "steerable" not in json.loads((both / "meta/info.json").read_text())
    assert json.loads((both / PROVENANCE).read_text())["producers"]["motion"] == "heuristic:motion"
