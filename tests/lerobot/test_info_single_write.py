"""info.json after steerable's typed edits, read by lerobot 0.6's own `load_info` (#38).

The main suite (tests/test_info_single_write.py) pins one write per review save and the bytes of
the edit; this is LeRobot's reader on the result: every key steerable wrote, with the same values,
and nothing it does not know (no "Unknown fields" warning).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from lerobot.datasets.io_utils import load_info as lerobots_load_info

from steerable.dataset import LeRobotDataset
from steerable.dataset.layout import INFO_PATH, PROVENANCE_KEY
from steerable.dataset.review import review_status, save_episode
from steerable.dataset.writer import EpisodeLanguage, write_language

FIXTURE = Path("/work/shared/data/so101_record_test")


@pytest.mark.timeout(120)
def test_lerobot_reads_every_key_of_the_info_json_steerable_wrote(tmp_path: Path) -> None:
    root = tmp_path / "so101"
    shutil.copytree(FIXTURE, root)
    raw = json.loads((root / INFO_PATH).read_text(encoding="utf-8"))
    raw[PROVENANCE_KEY] = {"producers": {"subtask": "old-model"}}  # an older steerable's key
    (root / INFO_PATH).write_text(json.dumps(raw, indent=4), encoding="utf-8")
    ds = LeRobotDataset(root)
    write_language(ds, {0: EpisodeLanguage()})
    assert save_episode(ds, 0, None, None, status="reviewed") is not None
    assert review_status(ds) == {0: "reviewed"}
    ours = json.loads((root / INFO_PATH).read_text(encoding="utf-8"))
    theirs = lerobots_load_info(root).to_dict()
    assert PROVENANCE_KEY not in ours and "language_persistent" in ours["features"]
    assert theirs == ours
