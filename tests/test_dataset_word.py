"""`steerable annotate DATASET`: a Hub repo id or a local folder, decided by the one rule `open_dataset` reads a
source with (`dataset.hub.looks_like_repo_id`); a word that is neither is refused in one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from steerable.annotate.config import AnnotateConfig
from steerable.cli.main import main
from steerable.errors import ConfigError


def test_a_repo_id_and_a_folder(tmp_path: Path) -> None:
    assert AnnotateConfig(dataset="user/name").repo_id == "user/name"
    assert AnnotateConfig(dataset=str(tmp_path)).root == tmp_path


def test_a_missing_folder_is_no_hub_lookup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match="is not a folder"):
        AnnotateConfig(dataset="./no_such_dir")
    assert main(["annotate", "./no_such_dir"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"steerable: error: DATASET ./no_such_dir: {tmp_path.resolve() / 'no_such_dir'} is not a folder "
                   "(a Hub dataset is named USER/NAME)"]
