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
Run: `python benchmarks/view.py [--episodes 500] [--real_only]`.
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
    args = parser.parse_args()
    if args.real_only:
        with tempfile.TemporaryDirectory() as tmp:
            real = measure_real(Path(tmp))
        print_real(real)
        print(f"RESULT real_export_s_per_episode={real[-1]['per_episode']:.2f} "
              f"real_export_one_clip_s_per_episode={real[0]['per_episode']:.2f} real_episodes={real[0]['episodes']:.0f}")
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
