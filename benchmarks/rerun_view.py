"""Benchmark: `steerable view --rerun` on a 500-frame episode with two cameras, video as asset vs frames.

(Named rerun_view.py: a script benchmarks/rerun.py would shadow the `rerun` SDK on sys.path.)

The dataset: 3 episodes of 500 frames at 30 fps, two 320x240 H.264 cameras (textured frames with a
moving square, so the encoder has real work), 4-dim state and action, subtask/motion rows every 100
frames and one VQA exchange per camera. The middle episode is logged to an .rrd file:

- asset: the episode's packets remuxed out of the shared mp4 and logged once as an `AssetVideo`,
  plus one `VideoFrameReference` per frame (what `steerable view --rerun` does);
- frames: every frame decoded (PyAV) and logged as an uncompressed `rr.Image`.

Reported per mode: wall time of `log_dataset` (median of --repeats), the .rrd size, and frames per
second logged. Run: `python benchmarks/rerun_view.py [--frames 500] [--repeats 3]`.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from steerable.dataset import LeRobotDataset
from steerable.dataset.build import DatasetBuilder, frame_timestamps
from steerable.dataset.writer import EpisodeLanguage, write_language
from steerable.viewer.rerun import VideoMode, log_dataset, parse_target

FPS = 30
W, H = 320, 240
CAMERAS = ("observation.images.top", "observation.images.wrist")


def _frames(n: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:H, 0:W]
    base = np.stack([(xx * 255 // W), (yy * 255 // H), ((xx + yy) * 127 // (W + H))], axis=-1).astype(np.int16)
    base += rng.integers(-20, 20, size=(H, W, 3), dtype=np.int16)
    out = []
    for i in range(n):
        f = np.clip(base, 0, 255).astype(np.uint8)
        x = int((W - 40) * (0.5 + 0.5 * np.sin(i / 40)))
        y = int((H - 40) * (0.5 + 0.5 * np.cos(i / 55)))
        f[y : y + 40, x : x + 40] = (200, 40, 40)
        out.append(f)
    return out


def make_dataset(root: Path, frames: int, episodes: int = 3) -> LeRobotDataset:
    names = ["ee.x", "ee.y", "ee.z", "gripper"]
    features = {
        "observation.state": {"dtype": "float32", "shape": [4], "names": names},
        "action": {"dtype": "float32", "shape": [4], "names": names},
        **{c: {"dtype": "video", "shape": [H, W, 3]} for c in CAMERAS},
    }
    t = np.arange(frames) / FPS
    with DatasetBuilder(root, fps=FPS, features=features, robot_type="bench", episodes_per_file=episodes) as b:
        for e in range(episodes):
            state = np.stack([np.sin(t + e), np.cos(t), 0.1 * t, (t > t[-1] / 2).astype(float)], 1).astype(np.float32)
            b.add_episode("pick and place", {"observation.state": state, "action": state},
                          {c: _frames(frames, 10 * e + k) for k, c in enumerate(CAMERAS)})
    ds = LeRobotDataset(root)
    stamps = [float(x) for x in frame_timestamps(frames, FPS)]
    updates = {}
    for ep in ds.episodes:
        rows = [
            {"role": "assistant", "content": f"{style} {k}", "style": style, "timestamp": stamps[start],
             "camera": None, "tool_calls": None}
            for k, start in enumerate(range(0, frames, 100)) for style in ("subtask", "motion")
        ]
        box = json.dumps({"detections": [{"label": "square", "bbox_format": "xyxy", "bbox": [10, 10, 60, 60]}]})
        events = [
            (stamps[50], {"role": role, "content": text, "style": "vqa", "camera": c, "tool_calls": None})
            for c in CAMERAS for role, text in (("user", "where is the square?"), ("assistant", box))
        ]
        updates[ep.episode_index] = EpisodeLanguage(persistent=rows, events=events)
    write_language(ds, updates)
    return LeRobotDataset(root)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        started = time.perf_counter()
        ds = make_dataset(tmp / "ds", args.frames)
        print(f"dataset: 3 x {args.frames} frames, 2 cameras {W}x{H} h264 @ {FPS} fps "
              f"(built in {time.perf_counter() - started:.1f} s)")
        results: dict[str, dict[str, Any]] = {}
        modes: tuple[VideoMode, ...] = ("asset", "frames")
        for mode in modes:
            times, size, how = [], 0, ""
            for r in range(args.repeats):
                out = tmp / f"{mode}_{r}.rrd"
                t0 = time.perf_counter()
                (log,) = log_dataset(ds, [1], parse_target(str(out)), video=mode)
                times.append(time.perf_counter() - t0)
                size, how = out.stat().st_size, ", ".join(sorted(set(log.cameras.values())))
                out.unlink()
            seconds = statistics.median(times)
            results[mode] = {"s": seconds, "mb": size / 1e6, "fps": args.frames / seconds, "how": how}
        print(f"{'mode':<8}{'video logged as':<18}{'log time (s)':>14}{'frames/s':>10}{'.rrd (MB)':>11}")
        for mode, r in results.items():
            print(f"{mode:<8}{r['how']:<18}{r['s']:>14.2f}{r['fps']:>10.0f}{r['mb']:>11.1f}")
        a, f = results["asset"], results["frames"]
        print(
            f"RESULT frames={args.frames} cameras=2 asset_s={a['s']:.2f} frames_s={f['s']:.2f} "
            f"speedup={f['s'] / a['s']:.1f} asset_mb={a['mb']:.1f} frames_mb={f['mb']:.1f}"
        )


if __name__ == "__main__":
    main()
