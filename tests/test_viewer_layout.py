"""On an episode without video, the "video file ... is missing" note wraps inside the player: the player
keeps the stage's width and the Now panel beside it keeps its room (served and exported)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from steerable.dataset import LeRobotDataset
from steerable.viewer import export_site
from test_viewer_browser import browser, page  # noqa: F401  (fixtures)
from test_viewer_edit import copy_dataset
from viewer_data import start_view


@pytest.fixture
def no_video(viewer_ds: Path, tmp_path: Path) -> Path:
    root = copy_dataset(viewer_ds, tmp_path / "ds")
    shutil.rmtree(root / "videos")
    return root


def check_layout(page: Any, url: str) -> None:  # noqa: F811
    page.goto(url)
    page.wait_for_function("document.getElementById('video-note').textContent.includes('is missing')")
    box = {sel: page.locator(sel).bounding_box() for sel in ("#player", "#stage", "#video-note", "#now")}
    assert box["#player"]["width"] == box["#stage"]["width"], "the note does not widen the player"
    assert box["#video-note"]["width"] <= box["#stage"]["width"]
    assert box["#now"]["x"] >= box["#stage"]["x"] + box["#stage"]["width"]
    assert box["#now"]["width"] > 400, "the Now panel keeps its room (1400 px window)"


def test_missing_video_note_wraps_in_the_served_page(page: Any, no_video: Path) -> None:  # noqa: F811
    proc, url = start_view(str(no_video))
    try:
        check_layout(page, url)
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_missing_video_note_wraps_in_the_export(page: Any, no_video: Path, tmp_path: Path) -> None:  # noqa: F811
    index = export_site(LeRobotDataset(no_video), tmp_path / "site", [0])
    check_layout(page, index.as_uri())
