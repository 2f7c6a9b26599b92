"""Benchmark: `steerable view` on a 500-episode dataset in headless chromium, served vs exported.

The dataset is cheap on purpose (64x48 h264, 24 frames per episode, 50 episodes per mp4 and parquet
file, subtask/motion rows and one VQA exchange per episode), so the figures measure the viewer, not
video decoding. For each mode: first contentful paint (the browser's own `paint` entry), time until
the first episode is ready (list, tracks, plot drawn and the video's metadata loaded), the time from
clicking a span to the video's `seeked` event, and the time to open another episode from the list.
The server is warmed first, as `steerable view` does while it starts (the cold cost of the episode
list and the first payload is printed on its own); the export's build time is reported too.
Then `view --export` of real episodes whose video a browser cannot play (`../shared/data/lingzu_teleop_4`:
MPEG-4 part 2, 640x480, 30 fps, re-encoded to H.264), in seconds per episode, with one clip at a time
and with the default pool (one clip per two cores).
The editor (`steerable view --edit`, `--edit_only`): on the 500-episode dataset, the time from a key
press (split, undo, redo, boundary to the playhead, retype by keyboard) to the redrawn timeline, as the
page measures it (keydown `timeStamp` to the laid-out lanes, and to the next animation frame); on a
50-episode dataset, the time to save one episode (the POST until its reply: validation, the durable
folder commit, the revision, the fresh payload), over several saves.
Run: `python benchmarks/view.py [--episodes 500] [--real_only | --edit_only]`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from steerable.dataset import LeRobotDataset
from steerable.dataset.build import DatasetBuilder, frame_timestamps
from steerable.dataset.writer import EpisodeLanguage, write_language
from steerable.viewer import ViewerData, export_site, make_server

REAL = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "lingzu_teleop_4"
FPS, FRAMES, W, H = 10, 24, 64, 48
CAMERA = "observation.images.top"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def make_dataset(root: Path, episodes: int) -> Path:
    rng = np.random.default_rng(0)
    features = {
        "observation.state": {"dtype": "float32", "shape": [4], "names": ["ee.x", "ee.y", "ee.z", "gripper.pos"]},
        "action": {"dtype": "float32", "shape": [4], "names": ["ee.x", "ee.y", "ee.z", "gripper.pos"]},
        CAMERA: {"dtype": "video", "shape": [H, W, 3]},
    }
    t = np.arange(FRAMES) / FPS
    with DatasetBuilder(root, fps=FPS, features=features, robot_type="bench", episodes_per_file=50) as b:
        for e in range(episodes):
            state = np.stack(
                [np.sin(t + e), np.cos(t), 0.1 * t, (np.arange(FRAMES) > FRAMES // 2).astype(float)], axis=1
            ).astype(np.float32)
            shade = rng.integers(0, 255, size=3, dtype=np.uint8)
            frames = [np.full((H, W, 3), shade, dtype=np.uint8) for _ in range(FRAMES)]
            for i, f in enumerate(frames):
                f[:, (i * 2) % W] = 255
            b.add_episode(f"task {e % 7}", {"observation.state": state, "action": state}, {CAMERA: frames})
    ds = LeRobotDataset(root)
    stamps = [float(x) for x in frame_timestamps(FRAMES, FPS)]
    updates = {}
    for ep in ds.episodes:
        rows = []
        for k, start in enumerate((0, 8, 16)):
            for style, text in (("subtask", f"step {k}"), ("motion", f"move {k}")):
                rows.append(
                    {"role": "assistant", "content": text, "style": style, "timestamp": stamps[start],
                     "camera": None, "tool_calls": None}
                )
        box = json.dumps({"detections": [{"label": "thing", "bbox_format": "xyxy", "bbox": [8, 8, 40, 30]}]})
        vqa = {"style": "vqa", "camera": CAMERA, "tool_calls": None}
        events = [
            (stamps[5], {"role": "user", "content": "where is the thing?", **vqa}),
            (stamps[5], {"role": "assistant", "content": box, **vqa}),
        ]
        updates[ep.episode_index] = EpisodeLanguage(persistent=rows, events=events)
    write_language(ds, updates)
    return root


def measure(browser: Any, url: str, episodes: int, seeks: int, switches: int) -> dict[str, float]:
    context = browser.new_context(viewport={"width": 1400, "height": 950}, bypass_csp=True)
    page = context.new_page()
    start = time.perf_counter()
    page.goto(url)
    page.wait_for_selector("body[data-ready='1']", timeout=120000)
    ready = (time.perf_counter() - start) * 1000
    fcp = page.evaluate(
        "(performance.getEntriesByType('paint').find(e => e.name === 'first-contentful-paint') || {}).startTime"
    )
    seek_ms = []
    for i in range(seeks):
        seek_ms.append(
            page.evaluate(
                """(i) => new Promise(resolve => {
                    const v = document.getElementById('video');
                    const spans = document.querySelectorAll('.span.subtask');
                    const t0 = performance.now();
                    v.addEventListener('seeked', () => resolve(performance.now() - t0), {once: true});
                    spans[(i + 1) % spans.length].click();
                })""",
                i,
            )
        )
    switch_ms = []
    rng = np.random.default_rng(1)
    for n in rng.choice(np.arange(1, episodes), size=switches, replace=False):
        t0 = time.perf_counter()
        page.evaluate(f"window.steerableView.openEpisode({int(n)})")
        page.wait_for_function(
            f"window.steerableView.state.ep.episode_index === {int(n)} && document.body.dataset.ready === '1'"
        )
        switch_ms.append((time.perf_counter() - t0) * 1000)
    context.close()
    return {
        "fcp": float(fcp or 0.0),
        "ready": ready,
        "seek": statistics.median(seek_ms),
        "seek_p95": float(np.percentile(seek_ms, 95)),
        "switch": statistics.median(switch_ms),
    }


def measure_keys(browser: Any, url: str, presses: int) -> dict[str, float]:
    """Key press to redrawn timeline in the editor: split / undo / redo / move a boundary, `presses` times."""
    context = browser.new_context(viewport={"width": 1400, "height": 950}, bypass_csp=True)
    page = context.new_page()
    page.goto(url + "&episode=7")
    page.wait_for_selector("body[data-ready='1']", timeout=120000)
    page.wait_for_selector("#revision-list li")
    page.locator(".lane[data-style='subtask'] .span").first.click()
    for _ in range(3):
        page.keyboard.press("ArrowRight")
    cycle = ["s", "Control+z", "Control+Shift+z", "Control+z", "]", "Control+z"]
    for i in range(presses):
        page.keyboard.press(cycle[i % len(cycle)])
    page.wait_for_function(f"window.steerableEdit.paints.length >= {presses}")
    laid = page.evaluate("window.steerableEdit.timings")[-presses:]
    painted = page.evaluate("window.steerableEdit.paints")[-presses:]
    context.close()
    return {
        "layout": statistics.median(laid), "layout_p95": float(np.percentile(laid, 95)),
        "paint": statistics.median(painted), "paint_p95": float(np.percentile(painted, 95)),
    }


def measure_saves(root: Path, saves: int) -> dict[str, float]:
    """One episode saved `saves` times through the edit server (HTTP POST to reply), and in-process."""
    import http.client

    from steerable.dataset.review import episode_rows, save_episode

    server = make_server(ViewerData(LeRobotDataset(root)), "127.0.0.1", 0, edit=True)
    server.start()
    ds = LeRobotDataset(root)
    rows = episode_rows(ds, 25)
    body: dict[str, Any] = {"persistent": rows.persistent, "events": [{"t": t, "row": r} for t, r in rows.events]}
    took = []
    try:
        conn = http.client.HTTPConnection(*server.server_address, timeout=120)
        for i in range(saves + 1):
            body["persistent"][0]["content"] = f"step 0, take {i}"
            t0 = time.perf_counter()
            conn.request("POST", "/api/episodes/25/language", body=json.dumps(body),
                         headers={"Content-Type": "application/json", "X-Steerable-Token": server.edit.token})
            reply = conn.getresponse()
            reply.read()
            assert reply.status == 200, reply.status
            if i:  # the first save also loads what a save needs for the first time
                took.append((time.perf_counter() - t0) * 1000)
        conn.close()
    finally:
        server.shutdown()
        server.server_close()
    direct = []
    for i in range(saves):
        persistent = [dict(r) for r in rows.persistent]
        persistent[0]["content"] = f"direct take {i}"
        t0 = time.perf_counter()
        save_episode(ds, 25, persistent, None)
        direct.append((time.perf_counter() - t0) * 1000)
    return {"http": statistics.median(took), "http_p95": float(np.percentile(took, 95)),
            "direct": statistics.median(direct)}


def run_edit(episodes: int, presses: int, saves: int) -> None:
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        root = make_dataset(Path(tmp) / "ds", episodes)
        server = make_server(ViewerData(LeRobotDataset(root)), "127.0.0.1", 0, edit=True)
        server.warm().join()
        server.start()
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
            keys = measure_keys(browser, server.url, presses)
            browser.close()
        server.shutdown()
        server.server_close()
        small = make_dataset(Path(tmp) / "ds50", 50)
        save = measure_saves(small, saves)
    print(f"key press to redrawn timeline ({episodes} episodes, {presses} presses): median {keys['layout']:.1f} ms "
          f"(p95 {keys['layout_p95']:.1f}), to the next frame painted {keys['paint']:.1f} ms "
          f"(p95 {keys['paint_p95']:.1f})")
    print(f"save of one episode of a 50-episode dataset ({saves} saves): POST to reply median {save['http']:.0f} ms "
          f"(p95 {save['http_p95']:.0f}); save_episode alone {save['direct']:.0f} ms")
    print(f"RESULT edit_key_redraw_ms={keys['layout']:.1f} edit_key_paint_ms={keys['paint']:.1f} "
          f"edit_save_ms={save['http']:.0f} edit_save_p95_ms={save['http_p95']:.0f} "
          f"edit_save_direct_ms={save['direct']:.0f} episodes={episodes}")


def measure_cold(root: Path) -> dict[str, float]:
    """Server-side cost of a cold start: the episode list and the first episode's payload (ms)."""
    data = ViewerData(LeRobotDataset(root))
    t0 = time.perf_counter()
    data.summary()
    t1 = time.perf_counter()
    data.episode(0, lambda camera, ep: ("", 0.0))
    t2 = time.perf_counter()
    return {"summary": (t1 - t0) * 1000, "episode": (t2 - t1) * 1000}


def measure_real_export(root: Path, tmp: Path, workers: int | None) -> dict[str, float]:
    """`view --export` of every episode of a real dataset with MPEG-4 part 2 video (s per episode)."""
    ds = LeRobotDataset(root)
    site = tmp / f"real_site_{workers}"
    t0 = time.perf_counter()
    export_site(ds, site, workers=workers)
    spent = time.perf_counter() - t0
    clips = sorted((site / "videos").rglob("*.mp4"))
    return {
        "workers": float(workers or max(1, min((os.cpu_count() or 1) // 2, len(ds.episodes)))),
        "default": float(workers is None),
        "episodes": len(ds.episodes),
        "frames": sum(e.length for e in ds.episodes),
        "s": spent,
        "per_episode": spent / max(1, len(ds.episodes)),
        "mb_per_episode": sum(c.stat().st_size for c in clips) / 1e6 / max(1, len(ds.episodes)),
    }


def measure_real(tmp: Path) -> list[dict[str, float]]:
    return [measure_real_export(REAL, tmp, workers) for workers in (1, 2, None)]


def print_real(runs: list[dict[str, float]]) -> None:
    for real in runs:
        print(f"real export ({REAL.name}: {real['episodes']:.0f} episodes, {real['frames']:.0f} frames 640x480 "
              f"MPEG-4 part 2 -> H.264, {os.cpu_count()} cores, {real['workers']:.0f} clip(s) at a time"
              f"{' (default)' if real['default'] else ''}): "
              f"{real['s']:.1f} s, {real['per_episode']:.2f} s per episode, "
              f"clips {real['mb_per_episode']:.2f} MB per episode")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=500)
    parser.add_argument("--seeks", type=int, default=30)
    parser.add_argument("--switches", type=int, default=10)
    parser.add_argument("--real_only", action="store_true", help="only the export of the real episodes")
    parser.add_argument("--edit_only", action="store_true", help="only the editor: key presses and saves")
    parser.add_argument("--presses", type=int, default=60)
    parser.add_argument("--saves", type=int, default=10)
    args = parser.parse_args()
    if args.edit_only:
        run_edit(args.episodes, args.presses, args.saves)
        return
    if args.real_only:
        with tempfile.TemporaryDirectory() as tmp:
            real = measure_real(Path(tmp))
        print_real(real)
        print(f"RESULT real_export_s_per_episode={real[-1]['per_episode']:.2f} "
              f"real_export_one_clip_s_per_episode={real[0]['per_episode']:.2f} "
              f"real_episodes={real[0]['episodes']:.0f}")
        return
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        root = make_dataset(Path(tmp) / "ds", args.episodes)
        made = time.perf_counter() - t0
        cold = measure_cold(root)
        server = make_server(ViewerData(LeRobotDataset(root)), "127.0.0.1", 0)
        server.warm().join()  # as `steerable view` does while the user opens the browser
        threading.Thread(target=server.serve_forever, daemon=True).start()
        t0 = time.perf_counter()
        index = export_site(root, Path(tmp) / "site")
        exported = time.perf_counter() - t0
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
            served = measure(browser, server.url, args.episodes, args.seeks, args.switches)
            static = measure(browser, index.as_uri(), args.episodes, args.seeks, args.switches)
            browser.close()
        server.shutdown()
        server.server_close()
        real = measure_real(Path(tmp))

    print(f"{args.episodes} episodes x {FRAMES} frames ({W}x{H} h264), dataset made in {made:.1f} s, "
          f"static export built in {exported:.1f} s; cold server: episode list {cold['summary']:.0f} ms, "
          f"first episode payload {cold['episode']:.0f} ms (the server computes both while starting)")
    print_real(real)
    print(f"| {'mode':<16} | first paint ms | ready ms | seek median ms | seek p95 ms | open episode ms |")
    print(f"|{'-' * 18}|---|---|---|---|---|")
    for name, m in (("served", served), ("export (file://)", static)):
        print(f"| {name:<16} | {m['fcp']:.0f} | {m['ready']:.0f} | {m['seek']:.1f} | {m['seek_p95']:.1f} | "
              f"{m['switch']:.0f} |")
    print(
        f"RESULT view_first_paint_ms={served['fcp']:.0f} view_ready_ms={served['ready']:.0f} "
        f"view_seek_ms={served['seek']:.1f} view_open_episode_ms={served['switch']:.0f} "
        f"export_first_paint_ms={static['fcp']:.0f} export_ready_ms={static['ready']:.0f} "
        f"export_seek_ms={static['seek']:.1f} export_build_s={exported:.1f} "
        f"cold_list_ms={cold['summary']:.0f} episodes={args.episodes} "
        f"real_export_s_per_episode={real[-1]['per_episode']:.2f} "
        f"real_export_one_clip_s_per_episode={real[0]['per_episode']:.2f}"
    )


if __name__ == "__main__":
    main()
