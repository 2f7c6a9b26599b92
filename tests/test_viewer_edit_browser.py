"""The editor of `steerable view --edit` in real headless chromium (Playwright, /usr/bin/chromium).

One review of episode 1, as a person makes it: drag a subtask's start edge and save (the parquet holds
the new start at that frame's stored timestamp); split, merge, retype, delete an interjection with its
say, move a VQA box, undo and redo, mark the episode reviewed, save again; a reload shows the saved
state; the revision list shows both saves, and going back to revision 0 restores the old bytes.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.compute as pc
import pytest

from steerable.dataset import LeRobotDataset
from steerable.dataset.parquet import read_parquet
from steerable.dataset.review import review_status
from steerable.language.rows import rows_from_arrow
from steerable.language.styles import LANGUAGE_EVENTS, LANGUAGE_PERSISTENT
from test_viewer_browser import ARGS, CHROMIUM
from test_viewer_edit import copy_dataset, dataset_state
from viewer_data import TOP, TOP_BOX, start_view


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    assert CHROMIUM.is_file(), "chromium is missing: `make test` installs it (apt-get install chromium)"
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        yield b
        b.close()


def stored(root: Path, episode: int) -> tuple[list[dict[str, Any]], list[tuple[float, dict[str, Any]]], np.ndarray]:
    """The episode's language as the parquet holds it: persistent rows, (time, row) events, frame timestamps."""
    path = sorted(root.glob("data/*/*.parquet"))[0]
    table = read_parquet(path, ["episode_index", "timestamp", LANGUAGE_PERSISTENT, LANGUAGE_EVENTS])
    table = table.filter(pc.equal(table.column("episode_index"), episode))
    stamps = table.column("timestamp").to_numpy()
    persistent = rows_from_arrow(table.column(LANGUAGE_PERSISTENT).slice(0, 1))[0]
    events = [(float(t), r) for t, rows in zip(stamps, rows_from_arrow(table.column(LANGUAGE_EVENTS)), strict=True)
              for r in rows]
    return persistent, events, stamps


def model(pg: Any) -> dict[str, Any]:
    return pg.evaluate("window.steerableEdit.model")


def subtask_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted((r for r in rows if r["style"] == "subtask"), key=lambda r: r["timestamp"])


def top_box(events: list[Any]) -> list[int]:
    for e in events:
        row = e["row"] if isinstance(e, dict) else e[1]
        if row["style"] == "vqa" and row["role"] == "assistant" and row["camera"] == TOP:
            return json.loads(row["content"])["detections"][0]["bbox"]
    raise AssertionError("no top-camera VQA answer")


def drag(pg: Any, x0: float, y0: float, x1: float, y1: float) -> None:
    pg.mouse.move(x0, y0)
    pg.mouse.down()
    pg.mouse.move(x1, y1, steps=6)
    pg.mouse.up()


def wait_saved(pg: Any, text: str) -> None:
    pg.wait_for_function(f"document.getElementById('edit-state').textContent.indexOf({json.dumps(text)}) >= 0",
                         timeout=20000)
    pg.wait_for_selector("body[data-ready='1']", timeout=20000)


def test_review_an_episode_in_the_browser(browser: Any, viewer_ds: Path, tmp_path: Path) -> None:
    root = copy_dataset(viewer_ds, tmp_path / "ds")
    original = dataset_state(root)
    proc, url = start_view(str(root), "--edit")
    context = browser.new_context(viewport={"width": 1400, "height": 1000}, bypass_csp=True)
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    try:
        pg.goto(url + "&episode=1")
        pg.wait_for_selector("body[data-ready='1']", timeout=30000)
        pg.wait_for_selector("#revision-list li[data-revision='0']")
        assert "Ctrl+Z" in pg.locator("#keys").inner_text()  # the keys are on the page
        ep = pg.evaluate("window.steerableView.state.ep")
        stamps, duration = ep["stamps"], ep["duration"]
        lane = pg.locator(".lane[data-style='subtask']").bounding_box()
        y = lane["y"] + lane["height"] / 2

        def x_of(frame: int) -> float:
            return lane["x"] + lane["width"] * stamps[frame] / duration

        # 1. drag the second subtask's start edge 4 frames later, save: the parquet has it on that frame
        second = subtask_rows(model(pg)["persistent"])[1]
        f0 = stamps.index(second["timestamp"])
        edge = pg.locator(".lane[data-style='subtask'] .span").nth(1).locator(".edge-start").bounding_box()
        drag(pg, edge["x"] + 2, y, x_of(f0 + 4), y)
        assert subtask_rows(model(pg)["persistent"])[1]["timestamp"] == stamps[f0 + 4]
        assert pg.evaluate("window.steerableEdit.ops") == {"move": 1}
        pg.keyboard.press("Control+s")
        wait_saved(pg, "saved as revision 1")
        persistent, _, frame_times = stored(root, 1)
        starts = [r["timestamp"] for r in subtask_rows(persistent)]
        assert np.float32(starts[1]) == frame_times[f0 + 4]  # that frame's stored timestamp, exactly
        assert np.float32(second["timestamp"]) not in np.float32(starts)

        # 2. split the first subtask at the playhead, then merge the last two
        n = len(subtask_rows(model(pg)["persistent"]))
        pg.locator(".lane[data-style='subtask'] .span").first.click()
        for _ in range(5):
            pg.keyboard.press("ArrowRight")
        pg.keyboard.press("s")
        after_split = subtask_rows(model(pg)["persistent"])
        assert len(after_split) == n + 1 and after_split[0]["content"] == after_split[1]["content"]
        pg.locator(".lane[data-style='subtask'] .span").nth(n - 1).click()
        pg.keyboard.press("m")
        merged = subtask_rows(model(pg)["persistent"])
        assert len(merged) == n and merged[-1]["timestamp"] == after_split[-2]["timestamp"]

        # 3. retype the first subtask
        pg.locator(".lane[data-style='subtask'] .span").first.click()
        pg.keyboard.press("e")
        pg.keyboard.press("Control+a")
        pg.keyboard.type("grasp the purple cube")
        pg.keyboard.press("Enter")
        assert subtask_rows(model(pg)["persistent"])[0]["content"] == "grasp the purple cube"

        # 4. delete the interjection: its say goes with it
        pg.locator(".marker.interjection").click()
        pg.keyboard.press("Delete")
        assert pg.locator(".marker.interjection").count() == 0 and pg.locator(".marker.speech").count() == 0

        # 5. move the top camera's VQA box on its frame
        pg.locator(f".marker.vqa[data-camera='{TOP}']").click()
        pg.wait_for_function("document.querySelectorAll('#overlay rect.vqa-box').length === 1")
        pg.wait_for_function("!document.getElementById('video').seeking && "
                             "document.getElementById('video').readyState >= 2")
        box = pg.locator("#overlay rect.vqa-box").bounding_box()
        cx, cy = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
        drag(pg, cx, cy, cx + 30, cy + 20)
        moved = top_box(model(pg)["events"])
        dx, dy = moved[0] - TOP_BOX[0], moved[1] - TOP_BOX[1]
        assert dx > 5 and dy > 3 and moved == [TOP_BOX[0] + dx, TOP_BOX[1] + dy, TOP_BOX[2] + dx, TOP_BOX[3] + dy]

        # 6. undo and redo
        pg.keyboard.press("Control+z")
        assert top_box(model(pg)["events"]) == TOP_BOX
        pg.keyboard.press("Control+Shift+z")
        assert top_box(model(pg)["events"]) == moved
        ops = pg.evaluate("window.steerableEdit.ops")
        assert ops == {"split": 1, "merge": 1, "retype": 1, "delete_event": 1, "box": 1}

        # 7. reviewed, saved: the parquet holds every correction
        pg.keyboard.press("r")
        pg.keyboard.press("Control+s")
        wait_saved(pg, "saved as revision 2")
        persistent, events, _ = stored(root, 1)
        assert subtask_rows(persistent)[0]["content"] == "grasp the purple cube"
        assert len(subtask_rows(persistent)) == n
        assert not [r for _, r in events if r["style"] == "interjection" or r["style"] is None]
        assert top_box(events) == moved  # the stored pixels changed
        assert review_status(LeRobotDataset(root)) == {1: "reviewed"}
        pg.wait_for_selector("#episode-list .episode[data-episode='1'] .ep-status.reviewed")

        # 8. a reload shows the saved state
        pg.reload()
        pg.wait_for_selector("body[data-ready='1']", timeout=30000)
        pg.wait_for_selector("#revision-list li[data-revision='2']")
        assert pg.locator(".lane[data-style='subtask'] .span").first.inner_text() == "grasp the purple cube"
        assert pg.locator(".marker.interjection").count() == 0
        pg.locator(f".marker.vqa[data-camera='{TOP}']").click()
        pg.wait_for_function("document.querySelectorAll('#overlay rect.vqa-box').length === 1")
        drawn = pg.eval_on_selector("#overlay rect.vqa-box",
                                    "r => ['x','y','width','height'].map(k => +r.getAttribute(k))")
        assert drawn == [moved[0], moved[1], moved[2] - moved[0], moved[3] - moved[1]]
        assert pg.evaluate("document.getElementById('review-status').value") == "reviewed"

        # 9. the revisions: both saves listed; going back to revision 0 restores the old bytes
        listed = pg.eval_on_selector_all("#revision-list li", "ns => ns.map(n => n.dataset.revision)")
        assert listed == ["2", "1", "0"]
        pg.locator("#revision-list li[data-revision='0'] .go-back").click()
        wait_saved(pg, "went back to revision 0")
        assert dataset_state(root) == original
        pg.wait_for_selector("#revision-list li[data-revision='3']")
        assert pg.locator(".marker.interjection").count() == 1
    finally:
        context.close()
        proc.terminate()
        proc.wait(timeout=20)
    assert errors == []
