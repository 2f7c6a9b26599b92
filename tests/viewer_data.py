"""An annotated synthetic dataset for the viewer tests: CLI-made, plus VQA, interjection and `say` rows."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from steerable.dataset import LeRobotDataset
from steerable.dataset.writer import EpisodeLanguage, write_language
from steerable.language.rows import rows_from_arrow, speech_row
from steerable.language.styles import LANGUAGE_PERSISTENT

TOP = "observation.images.top"
WRIST = "observation.images.wrist"
# The VQA exchange written on frame VQA_FRAME of every episode: a box in the top camera, a point in the wrist one.
VQA_FRAME = 20
TOP_BOX = [40, 30, 120, 100]
WRIST_POINT = [64, 50]
SAY_FRAME = 45


def steerable(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "steerable.cli.main", *args], capture_output=True, text=True, timeout=120
    )


def make_viewer_dataset(root: Path, episodes: int = 3) -> Path:
    """`make-dataset synthetic` + no-model `annotate`, then VQA/interjection/speech event rows."""
    made = steerable("make-dataset", "synthetic", "--out", str(root), "--episodes", str(episodes),
                     "--cameras", "top,wrist", "--seed", "3")
    assert made.returncode == 0, made.stderr
    annotated = steerable("annotate", "--root", str(root))
    assert annotated.returncode == 0, annotated.stderr
    add_event_rows(root)
    return root


def add_event_rows(root: Path) -> None:
    ds = LeRobotDataset(root)
    updates = {}
    for ep in ds.episodes:
        table = ds.read_episode(ep.episode_index, ["timestamp", LANGUAGE_PERSISTENT])
        persistent = rows_from_arrow(table.column(LANGUAGE_PERSISTENT).slice(0, 1))[0]
        stamps = table.column("timestamp").to_pylist()
        t_vqa, t_say = stamps[VQA_FRAME], stamps[SAY_FRAME]
        box = {"detections": [{"label": "cube", "bbox_format": "xyxy", "bbox": TOP_BOX}]}
        point = {"label": "gripper tip", "point_format": "xy", "point": WRIST_POINT}
        vqa = {"style": "vqa", "tool_calls": None}
        events = [
            (t_vqa, {"role": "user", "content": "where is the cube?", "camera": TOP, **vqa}),
            (t_vqa, {"role": "assistant", "content": json.dumps(box), "camera": TOP, **vqa}),
            (t_vqa, {"role": "user", "content": "point at the gripper tip", "camera": WRIST, **vqa}),
            (t_vqa, {"role": "assistant", "content": json.dumps(point), "camera": WRIST, **vqa}),
            (t_say, {"role": "user", "content": "use the other bin instead", "style": "interjection",
                     "camera": None, "tool_calls": None}),
            (t_say, speech_row("Okay, switching to the other bin.")),
        ]
        updates[ep.episode_index] = EpisodeLanguage(persistent=persistent, events=events)
    write_language(ds, updates)


def session_viewer_dataset(base: Path) -> Path:
    """The viewer dataset under the session's temp root, made once for every viewer test module."""
    root = base / "viewer-ds"
    if not (root / "meta" / "info.json").is_file():
        make_viewer_dataset(root)
    return root


def start_view(*args: str) -> tuple[subprocess.Popen[str], str]:
    """Run `steerable view ... --port 0` and return the process and the URL it printed."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "steerable.cli.main", "view", *args, "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if "http://" not in line:
        proc.kill()
        raise AssertionError(f"no URL printed: {line!r} {proc.stderr.read() if proc.stderr else ''}")
    return proc, line[line.index("http://") :].split()[0]
