"""Frame decoding speed: steerable's one-pass decode vs one seek per timestamp vs decoding every frame.

Run: .venv/bin/python benchmarks/decode.py [--seconds 20] [--repeats 2]

Cases: two generated 640x480 30 fps videos (H.264 with a 2 s GOP, and AV1 the way LeRobot encodes by
default: libsvtav1, a keyframe every 2 frames, crf 30) and the real lingzu fixture (its encoder's
keyframe every 0.4 s), each sampled at 1 and 4 frames per second of episode. Figures are requested
frames per second of wall time (best of --repeats). All three methods must return identical frames.
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import av
import numpy as np

from steerable.dataset.video import VideoWriter, available_codecs, decode_frames, probe_video

FIXTURE = Path(__file__).resolve().parents[2] / "shared" / "data" / "lingzu_teleop_4" / "videos" / "image"
FIXTURE_FILE = FIXTURE / "chunk-000" / "file-000.mp4"
Decoder = Callable[[Path, Sequence[float]], list[np.ndarray]]


def seek_per_timestamp(path: Path, timestamps: Sequence[float], offset: float = 0.0) -> list[np.ndarray]:
    """The naive way: for every request, seek to the keyframe before it and decode up to it."""
    out = []
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        assert stream.time_base is not None and stream.average_rate is not None
        half = 0.5 / float(stream.average_rate)
        for t in timestamps:
            target = offset + t
            container.seek(
                max(0, math.floor((target - half) / stream.time_base)), stream=stream, backward=True
            )
            for frame in container.decode(stream):
                if frame.time is not None and frame.time >= target - half:
                    out.append(frame.to_ndarray(format="rgb24"))
                    break
    return out


def decode_everything(path: Path, timestamps: Sequence[float], offset: float = 0.0) -> list[np.ndarray]:
    """One seek, then decode every frame up to the last request and keep the ones asked for."""
    times = sorted(offset + t for t in timestamps)
    picked: dict[float, np.ndarray] = {}
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        assert stream.time_base is not None and stream.average_rate is not None
        half = 0.5 / float(stream.average_rate)
        container.seek(max(0, math.floor((times[0] - half) / stream.time_base)), stream=stream, backward=True)
        i = 0
        for frame in container.decode(stream):
            while i < len(times) and frame.time is not None and frame.time >= times[i] - half:
                picked[times[i]] = frame.to_ndarray(format="rgb24")
                i += 1
            if i == len(times):
                break
    return [picked[offset + t] for t in timestamps]


def _ours(path: Path, timestamps: Sequence[float]) -> list[np.ndarray]:
    return decode_frames(path, timestamps)


def _synthetic_frames(count: int, width: int = 640, height: int = 480) -> list[np.ndarray]:
    """Moving gradients, a checkerboard and a sliding block: enough texture and motion to be realistic."""
    y, x = np.mgrid[0:height, 0:width]
    base = np.stack([x % 256, y % 256, ((x // 40 + y // 40) % 2) * 200], -1).astype(np.uint8)
    frames = []
    for i in range(count):
        img = np.roll(base, (2 * i, 3 * i), axis=(0, 1))
        cx = int(width / 2 + width / 3 * math.sin(i / 20))
        img[200:280, cx - 40 : cx + 40] = (255, 255, 0)
        frames.append(img)
    return frames


def _encode(path: Path, frames: list[np.ndarray], codec: str, gop: int, crf: int, preset: str) -> Path:
    with VideoWriter(path, 30, 640, 480, codec=codec, crf=crf, gop=gop, preset=preset) as writer:
        for frame in frames:
            writer.write(frame)
    return path


def _best_fps(
    method: Decoder, path: Path, timestamps: list[float], repeats: int
) -> tuple[float, list[np.ndarray]]:
    best = math.inf
    frames: list[np.ndarray] = []
    for _ in range(repeats):
        start = time.perf_counter()
        frames = method(path, timestamps)
        best = min(best, time.perf_counter() - start)
    return len(timestamps) / best, frames


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="length of the generated videos")
    parser.add_argument("--repeats", type=int, default=2, help="timing runs per method (best is kept)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        frames = _synthetic_frames(round(args.seconds * 30))
        videos = [
            ("generated h264, gop 60", _encode(Path(tmp, "h264.mp4"), frames, "h264", 60, 23, "veryfast"))
        ]
        if available_codecs()["av1"].encoders and available_codecs()["av1"].decoders:
            videos.append(
                ("generated av1, gop 2 (LeRobot)", _encode(Path(tmp, "av1.mp4"), frames, "av1", 2, 30, "10"))
            )
        else:
            print("(AV1 case skipped: this PyAV build lacks an AV1 encoder or decoder)")
        if FIXTURE_FILE.is_file():
            videos.append(("lingzu fixture ep 0", FIXTURE_FILE))
        else:
            print(f"(lingzu case skipped: {FIXTURE_FILE} not found)")

        header = (
            f"{'video':32} {'codec':6} {'req/s':>5} {'n':>4} {'ours':>8} {'naive':>8} {'all':>8} "
            f"{'vs naive':>9} {'vs all':>7}"
        )
        print(header)
        print("-" * len(header))
        totals = {"ours": 0.0, "naive": 0.0, "all": 0.0}  # seconds spent per method, over all cases
        requested = 0
        for label, path in videos:
            info = probe_video(path)
            length = (info.frames or 0) / info.fps
            for rate in (1, 4):
                timestamps = [i / rate for i in range(math.floor(length * rate))]
                fps: dict[str, float] = {}
                results = {}
                for name, method in (
                    ("ours", _ours),
                    ("naive", seek_per_timestamp),
                    ("all", decode_everything),
                ):
                    fps[name], results[name] = _best_fps(method, path, timestamps, args.repeats)
                    totals[name] += len(timestamps) / fps[name]
                for name in ("naive", "all"):
                    same = all(
                        np.array_equal(a, b) for a, b in zip(results["ours"], results[name], strict=True)
                    )
                    if not same:
                        raise SystemExit(f"{label} at {rate}/s: our frames differ from the {name} method's")
                requested += len(timestamps)
                print(
                    f"{label:32} {info.codec:6} {rate:>5} {len(timestamps):>4} {fps['ours']:>8.1f} "
                    f"{fps['naive']:>8.1f} {fps['all']:>8.1f} {fps['ours'] / fps['naive']:>8.2f}x "
                    f"{fps['ours'] / fps['all']:>6.2f}x"
                )
    ours, naive, everything = (requested / totals[name] for name in ("ours", "naive", "all"))
    print("figures: requested frames decoded per second (RGB arrays returned), best of", args.repeats)
    print(
        f"RESULT decode_fps={ours:.1f} naive_fps={naive:.1f} decode_all_fps={everything:.1f} "
        f"speedup={ours / naive:.2f} speedup_vs_all={ours / everything:.2f}"
    )


if __name__ == "__main__":
    main()
