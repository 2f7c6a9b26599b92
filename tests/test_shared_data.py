"""The shared-fixture helper: a missing ../shared/data fails a test unless the opt-out is set."""

from __future__ import annotations

from pathlib import Path

import pytest

import shared_data
from shared_data import OPT_OUT, shared_dataset, shared_path


def test_present_fixtures_resolve() -> None:
    assert (shared_dataset("so101_record_test") / "meta" / "info.json").is_file()
    assert shared_path("lingzu_teleop_4", "videos").is_dir()


def test_a_missing_fixture_fails_the_test(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(shared_data, "SHARED_DATA", tmp_path / "nowhere")
    monkeypatch.delenv(OPT_OUT, raising=False)
    with pytest.raises(pytest.fail.Exception, match=f"shared fixture .* is missing.*{OPT_OUT}=1"):
        shared_dataset("lingzu_teleop_4")
    monkeypatch.setenv(OPT_OUT, "0")
    with pytest.raises(pytest.fail.Exception):
        shared_path("lingzu_teleop_4")


def test_the_opt_out_skips_instead(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(shared_data, "SHARED_DATA", tmp_path / "nowhere")
    monkeypatch.setenv(OPT_OUT, "1")
    with pytest.raises(pytest.skip.Exception, match=OPT_OUT):
        shared_dataset("lingzu_teleop_4")
