"""The viewer in real headless chromium (Debian's /usr/bin/chromium, driven by Playwright).

Served and exported (file://) the same checks run: tracks drawn with subtask spans, the h264 video
plays, clicking a span seeks the video, a VQA box/point is drawn over the right camera at its frame,
the camera switch keeps the time, seeking to a frame's timestamp shows that very frame, the recipe
panel shows a sample, heuristic tracks and rows say so; the screenshot shows the box. On a real
dataset, the plot draws idle joints flat.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from steerable.dataset import LeRobotDataset
from steerable.viewer import export_site
from viewer_data import TOP, TOP_BOX, WRIST, start_view

CHROMIUM = Path("/usr/bin/chromium")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    assert CHROMIUM.is_file(), "chromium is missing: `make test` installs it (apt-get install chromium)"
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        yield b
        b.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    # Playwright evaluates its wait conditions as strings, which the page's CSP (no eval) forbids.
    context = browser.new_context(viewport={"width": 1400, "height": 950}, bypass_csp=True)
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    yield pg
    context.close()
    # 404s are expected from the traversal probes; anything else is a defect of the page
    assert [e for e in errors if "status of 404" not in e] == []


def video_time(pg: Any) -> float:
    return float(pg.evaluate("document.getElementById('video').currentTime"))


def check_viewer(pg: Any, shot: Path, ds: LeRobotDataset) -> None:
    """The checks shared by the served and the exported viewer (episode 1 open)."""
    pg.wait_for_selector("body[data-ready='1']", timeout=20000)
    ep = pg.evaluate("window.steerableView.state.ep")
    tracks = {t["style"]: t["items"] for t in ep["tracks"]}
    lanes = pg.eval_on_selector_all(".lane", "ns => ns.map(n => n.dataset.style)")
    assert lanes == [t["style"] for t in ep["tracks"]]
    spans = pg.locator(".lane[data-style='subtask'] .span.subtask")
    assert spans.count() == len(tracks["subtask"]) >= 2
    assert spans.first.get_attribute("data-style") == "subtask"
    assert pg.locator(".span.motion").count() == len(tracks["motion"])
    assert pg.locator(".marker.vqa").count() == 2 and pg.locator(".marker.speech").count() == 1
    # `annotate` without a model wrote the subtask and motion rows: marked heuristic, as `steerable info` shows
    badges = pg.eval_on_selector_all(".track-label .heuristic", "ns => ns.map(n => n.parentNode.dataset.style)")
    assert badges == ["subtask", "plan", "memory", "motion"]
    assert pg.locator("#active dt.subtask .heuristic").count() == 1
    assert pg.locator("#active dt.plan .heuristic").count() == 1  # named from the task by the motion annotator
    offset = {c["key"]: c["offset"] for c in ep["cameras"]}
    pg.click("#zoom-in")
    pg.click("#zoom-in")
    assert pg.evaluate("document.getElementById('lanes').style.width") == "400%"
    pg.evaluate(f"window.steerableView.seek({0.9 * ep['duration']})")
    assert pg.evaluate("document.getElementById('lanes-scroll').scrollLeft") > 0  # the playhead stays in view
    pg.click("#zoom-out")
    pg.click("#zoom-out")

    # h264 plays in Debian's chromium
    pg.evaluate("document.getElementById('video').play()")
    pg.wait_for_function("document.getElementById('video').currentTime > "
                         "0.3 + window.steerableView.state.ep.cameras[0].offset", timeout=10000)
    pg.evaluate("document.getElementById('video').pause()")
    assert pg.evaluate("document.getElementById('video').videoWidth") == 224

    # clicking a span seeks the video to its start; the playhead follows
    start = tracks["subtask"][1]["start"]
    spans.nth(1).click()
    assert video_time(pg) == pytest.approx(offset[TOP] + start, abs=0.02)
    pg.wait_for_function(f"document.getElementById('clock').textContent.startsWith('{start:.2f}')")
    playhead = pg.evaluate("parseFloat(document.getElementById('playhead').style.left)")
    assert playhead == pytest.approx(100 * start / ep["duration"], abs=0.5)

    # the top camera's VQA box at its frame (clicking its marker seeks there)
    pg.locator(f".marker.vqa[data-camera='{TOP}']").click()
    pg.wait_for_function("document.querySelectorAll('#overlay rect.vqa-box').length === 1")
    box = pg.eval_on_selector("#overlay rect.vqa-box", "r => ['x','y','width','height'].map(k => +r.getAttribute(k))")
    assert box == [TOP_BOX[0], TOP_BOX[1], TOP_BOX[2] - TOP_BOX[0], TOP_BOX[3] - TOP_BOX[1]]
    assert pg.locator("#overlay circle.vqa-point").count() == 0  # the point belongs to the wrist camera
    pg.wait_for_function("document.getElementById('video').readyState >= 2")
    pg.wait_for_function("document.querySelectorAll('#recipe-sample .msg').length > 0")
    pg.screenshot(path=str(shot))
    assert green_box_pixels(shot) > 100  # the box is visible on the frame, not only in the DOM

    # camera switch: same episode time, the other video, the other camera's overlay
    t = video_time(pg) - offset[TOP]
    pg.locator(f".camera-btn[data-camera='{WRIST}']").click()
    pg.wait_for_function(f"document.getElementById('video').dataset.camera === '{WRIST}' && "
                         "document.querySelectorAll('#overlay circle.vqa-point').length === 1")
    pg.wait_for_function("document.getElementById('video').readyState >= 1")
    assert "wrist" in pg.evaluate("document.getElementById('video').currentSrc")
    assert video_time(pg) == pytest.approx(offset[WRIST] + t, abs=0.02)
    assert pg.locator("#overlay rect.vqa-box").count() == 0
    check_frames_shown(pg, ds, ep["episode_index"], WRIST)


def shown_frame(pg: Any, width: int, height: int) -> np.ndarray:
    """The video element's pixels, letterbox cut off, scaled back to the camera's frame size."""
    shot = Image.open(io.BytesIO(pg.locator("#video").screenshot())).convert("RGB")
    scale = min(shot.width / width, shot.height / height)
    x0, y0 = (shot.width - width * scale) / 2, (shot.height - height * scale) / 2
    box = (round(x0) + 1, round(y0) + 1, round(x0 + width * scale) - 1, round(y0 + height * scale) - 1)
    return np.asarray(shot.crop(box).resize((width, height))).astype(float)


def check_frames_shown(pg: Any, ds: LeRobotDataset, episode: int, camera: str) -> None:
    """Seeking to a frame's timestamp shows that frame, not a neighbour (checked where the scene moves most)."""
    stamps = [float(t) for t in ds.episode_timestamps(episode)]
    frames = [f.astype(float) for f in ds.decode_frames(episode, camera, stamps)]
    step = [np.abs(a - b).mean() for a, b in zip(frames, frames[1:], strict=False)]
    moving = sorted(range(3, len(frames) - 3), key=lambda k: -min(step[k - 1], step[k]))[:3]
    height, width = frames[0].shape[:2]
    for k in moving:
        pg.evaluate(
            """(t) => new Promise(done => {
                const v = document.getElementById('video');
                v.addEventListener('seeked', () => requestAnimationFrame(() => requestAnimationFrame(done)),
                                   {once: true});
                window.steerableView.seek(t);
            })""",
            stamps[k],
        )
        shown = shown_frame(pg, width, height)
        distance = {i: np.abs(shown - frames[i]).mean() for i in range(k - 2, k + 3)}
        assert min(distance, key=distance.__getitem__) == k, (k, distance)


def green_box_pixels(png: Path) -> int:
    """Pixels of the overlay's box colour (#22ff88) in the screenshot."""
    rgb = np.asarray(Image.open(png).convert("RGB")).astype(int)
    near = np.abs(rgb - np.array([0x22, 0xFF, 0x88])).sum(axis=2) < 60
    return int(near.sum())


def test_served_viewer(page: Any, viewer_ds: Path, tmp_path: Path) -> None:
    proc, url = start_view(str(viewer_ds))
    try:
        page.goto(url + "#episode=1")
        check_viewer(page, tmp_path / "served.png", LeRobotDataset(viewer_ds))
        assert page.evaluate("fetch('files/%2e%2e/%2e%2e/etc/passwd').then(r => r.status)") == 404
        assert page.evaluate("fetch('files/%2E%2E%2Fmeta%2Finfo.json').then(r => r.status)") == 404
        # filtering the episode list
        page.fill("#filter", "vqa")
        assert page.locator("#episode-list .episode").count() == 3
        page.fill("#filter", "no episode says this")
        assert page.locator("#episode-list .episode").count() == 0
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_exported_viewer_from_file_url(page: Any, viewer_ds: Path, tmp_path: Path) -> None:
    index = export_site(viewer_ds, tmp_path / "site", episodes=[0, 1])
    page.goto(index.as_uri() + "#episode=1")
    check_viewer(page, tmp_path / "exported.png", LeRobotDataset(viewer_ds))
    # another episode's data script loads on demand from disk
    page.locator("#episode-list .episode[data-episode='0']").click()
    page.wait_for_function("window.steerableView.state.ep.episode_index === 0 && document.body.dataset.ready === '1'")


def test_real_idle_joints_are_drawn_flat(page: Any, lingzu: Path) -> None:
    proc, url = start_view(str(lingzu), "--episodes", "0")
    try:
        page.goto(url)
        page.wait_for_selector("body[data-ready='1']", timeout=60000)
        heights = page.eval_on_selector_all(
            "svg[data-feature='state'] polyline.dim",
            """ns => ns.map(n => {
                const ys = n.getAttribute('points').split(' ').map(p => +p.split(',')[1]);
                return [n.dataset.dim, Math.max(...ys) - Math.min(...ys), n.classList.contains('flat')];
            })""",
        )
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    drawn = {name: (height, flat) for name, height, flat in heights}
    for joint in range(1, 8):  # the idle left arm: a flat line, marked flat
        assert drawn[f"left.joint_{joint}.pos"] == (0, True)
    right = [drawn[f"right.joint_{joint}.pos"] for joint in range(1, 8)]
    assert not any(flat for _, flat in right) and max(h for h, _ in right) > 80  # the working arm fills the plot
