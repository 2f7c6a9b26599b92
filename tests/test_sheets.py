"""Contact sheets: tiling, time badges, JPEG output, the per-episode preview and `steerable sheets`."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from shared_data import shared_dataset
from steerable.annotate.modules.plan.config import PlanConfig
from steerable.annotate.modules.plan.preview import episode_sheets
from steerable.annotate.modules.plan.sheets import badge_text, build_contact_sheets
from steerable.dataset import open_dataset


def _lingzu() -> Path:
    return shared_dataset("lingzu_teleop_4")


def _frames(count: int, height: int = 120, width: int = 160) -> list[np.ndarray]:
    """Mid-grey frames with a distinct bright square each, so tiles are told apart."""
    out = []
    for i in range(count):
        frame = np.full((height, width, 3), 128, np.uint8)
        frame[height // 2 :, (i * 7) % (width - 20) : (i * 7) % (width - 20) + 20] = (250, 250, 30)
        out.append(frame)
    return out


def _badge_box(tile: np.ndarray) -> tuple[int, int]:
    """Width and height of the solid black badge in a tile's top-left corner."""
    dark = (tile.max(axis=2) < 40)
    height = int(np.argmin(dark[:, 1])) if not dark[:, 1].all() else tile.shape[0]
    width = int(np.argmin(dark[1, :])) if not dark[1, :].all() else tile.shape[1]
    return width, height


def test_frames_spread_evenly_over_the_fewest_sheets_in_order() -> None:
    times = [round(0.5 * i, 2) for i in range(23)]
    sheets = build_contact_sheets(_frames(23), times, columns=5, per_sheet=20, frame_width=112)
    # 23 frames need two sheets; 12 + 11 rather than a 20-frame sheet and a 3-frame tail.
    assert [len(s.times) for s in sheets] == [12, 11]
    assert [t for s in sheets for t in s.times] == times
    tile_h = round(120 * 112 / 160)
    # 5 columns and only the rows needed, with a 2 px gap between tiles.
    assert sheets[0].image.size == (5 * 112 + 4 * 2, 3 * tile_h + 2 * 2)


def test_each_tile_carries_a_legible_badge_of_its_own_time() -> None:
    sheets = build_contact_sheets(_frames(2), [1.0, 12.75], columns=2, frame_width=224)
    image = np.asarray(sheets[0].image)
    tile_h = round(120 * 224 / 160)
    first, second = image[:tile_h, :224], image[:tile_h, 226:450]
    width, height = _badge_box(first)
    # Sized with the tile (not Pillow's 10 px bitmap font) so it survives a model's downscaling.
    assert height >= 0.12 * tile_h and width > height
    badge = first[:height, :width]
    assert (badge.min(axis=2) > 200).sum() > 30, "the badge has white text on it"
    # A longer time gives a wider badge: the text really is the time.
    assert _badge_box(second)[0] > width
    assert badge_text(3.4666667) == "t=3.47s"


def test_jpeg_bytes_decode_to_the_sheet() -> None:
    sheet = build_contact_sheets(_frames(3), [0.0, 0.5, 1.0], quality=90)[0]
    decoded = Image.open(io.BytesIO(sheet.jpeg))
    assert decoded.format == "JPEG" and decoded.size == sheet.image.size
    diff = np.abs(np.asarray(decoded, np.int16) - np.asarray(sheet.image, np.int16)).mean()
    assert diff < 4


def test_bad_input_is_refused_clearly() -> None:
    with pytest.raises(ValueError, match="each frame needs its own time"):
        build_contact_sheets(_frames(3), [0.0, 0.5])
    with pytest.raises(ValueError, match="uint8"):
        build_contact_sheets([np.zeros((8, 8, 3), np.float32)], [0.0])
    assert build_contact_sheets([], []) == []


def test_episode_sheets_badge_stored_frame_times_of_real_video() -> None:
    ds = open_dataset(_lingzu())
    stored = set(ds.episode_timestamps(1).tolist())
    windows = episode_sheets(ds, 1)
    assert len(windows) == 1  # 14.3 s at 2 fps = 29 frames, under the 60-frame window
    times = [t for s in windows[0].sheets for t in s.times]
    assert len(times) == 29 and times[0] == 0.0 and all(t in stored for t in times)
    assert np.allclose(np.diff(times), 0.5, atol=0.02)
    tile = np.asarray(windows[0].sheets[0].image)[:168, :224]
    assert _badge_box(tile)[1] >= 20


def test_episode_sheets_follow_the_plan_windows() -> None:
    ds = open_dataset(_lingzu())
    config = PlanConfig(max_frames_per_prompt=12, window_overlap_s=1.0)
    windows = episode_sheets(ds, 1, config=config)
    spans = [[t for s in w.sheets for t in s.times] for w in windows]
    assert len(windows) == 3 and all(6 < len(s) <= 12 for s in spans)
    assert spans[0][0] == 0.0 and spans[-1][-1] == pytest.approx(14.0)
    assert all(later[0] < earlier[-1] for earlier, later in zip(spans, spans[1:], strict=False))


def test_sheets_command_writes_jpeg_files(tmp_path: Path) -> None:
    root = _lingzu()
    out = tmp_path / "sheets"
    cmd = [sys.executable, "-m", "steerable.cli.main", "sheets", str(root), "--episode", "2", "--out", str(out),
           "--frames_per_second", "1"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    index = json.loads((out / "episode_000002_image_sheets.json").read_text())
    assert [e["file"] for e in index] == sorted(p.name for p in out.glob("*.jpg"))
    assert sum(len(e["times"]) for e in index) == 14  # 13.2 s at 1 fps
    assert Image.open(out / index[0]["file"]).format == "JPEG"

    bad = subprocess.run([*cmd[:5], "--episode", "9", "--out", str(out)], capture_output=True, text=True)
    assert bad.returncode == 2 and "episode 9 is not in" in bad.stderr and "Traceback" not in bad.stderr
