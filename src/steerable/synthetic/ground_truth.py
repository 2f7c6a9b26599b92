"""What really happened in each synthetic episode: subtask spans, gripper events, object boxes.

Stored beside the dataset in `meta/steerable_ground_truth.json` (LeRobot ignores it). Every time
is a frame's stored float32 `timestamp`, so it compares exactly with the parquet column.
Subtasks cover the episode without gaps: each runs from its `start` up to the next one's `start`,
the last one up to and including `end`, the last frame's timestamp. A gripper event sits on the
first frame whose `gripper.closure` is past the 0.5 mid-point (0 = open, 1 = closed).
Boxes are `[x0, y0, x1, y1]` in pixels of the original frame, x1/y1 exclusive.
An episode of the generator also says how to rebuild its initial scene in the simulator (`scene`:
the generator's seed, the episode and the difficulty, for `SimEnv.reset_to_recorded`) and how it
ended (`outcome`: whether the task holds in the final world, where each cube ended up), so its
recorded actions can be replayed and checked (`steerable.synthetic.replay`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from steerable.dataset.atomic import atomic_write_bytes
from steerable.dataset.layout import GROUND_TRUTH_PATH
from steerable.errors import CorruptDatasetError, DatasetNotFoundError

__all__ = [
    "EpisodeTruth",
    "GripperEvent",
    "Interjection",
    "Outcome",
    "RecordedScene",
    "Subtask",
    "carry_ground_truth",
    "gripper_events",
    "read_ground_truth",
    "subtask_spans",
    "write_ground_truth",
]

_FORMAT_VERSION = 1


@dataclass(frozen=True)
class Subtask:
    start: float
    end: float
    text: str


@dataclass(frozen=True)
class GripperEvent:
    time: float
    frame_index: int
    kind: str  # "close" or "open"


@dataclass(frozen=True)
class Interjection:
    """A person redirected the placement at `time` (frame `frame_index`); the expert followed."""

    time: float
    frame_index: int
    cube: str
    old_target: str
    new_target: str


@dataclass(frozen=True)
class RecordedScene:
    """Where the episode's initial world came from: episode `episode` of the generator's `seed`, its
    task drawn at `difficulty` (`steerable.synthetic.generate.recorded_scene`)."""

    seed: int
    episode: int
    difficulty: str


@dataclass(frozen=True)
class Outcome:
    """How the episode ended: whether every step of the task holds in the final world (each to the
    target it ended with, nothing held), and each cube's final bottom-centre position (metres)."""

    success: bool
    cubes: dict[str, tuple[float, float, float]]

    def to_dict(self) -> dict[str, Any]:
        # Micrometres: enough for any comparison, and a short file.
        return {"success": self.success, "cubes": {k: [round(float(v), 6) for v in p] for k, p in self.cubes.items()}}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Outcome:
        cubes = {str(k): (float(x), float(y), float(z)) for k, (x, y, z) in d["cubes"].items()}
        return cls(bool(d["success"]), cubes)


@dataclass(frozen=True)
class EpisodeTruth:
    episode_index: int
    task: str
    subtasks: list[Subtask]
    gripper_events: list[GripperEvent]
    # camera key -> per frame -> [{"name": ..., "box": [x0, y0, x1, y1]}]
    boxes: dict[str, list[list[dict[str, Any]]]] = field(default_factory=dict)
    interjections: list[Interjection] = field(default_factory=list)
    scene: RecordedScene | None = None  # None: not made by the generator (or made before replay existed)
    outcome: Outcome | None = None

    def to_dict(self) -> dict[str, Any]:
        # Not dataclasses.asdict: it deep-copies every box dict, seconds for a few thousand frames.
        return {
            "episode_index": self.episode_index,
            "task": self.task,
            "subtasks": [asdict(s) for s in self.subtasks],
            "gripper_events": [asdict(e) for e in self.gripper_events],
            "boxes": self.boxes,
            # Only when there are some, so files made before interjections existed stay the same.
            **({"interjections": [asdict(i) for i in self.interjections]} if self.interjections else {}),
            **({"scene": asdict(self.scene)} if self.scene is not None else {}),
            **({"outcome": self.outcome.to_dict()} if self.outcome is not None else {}),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> EpisodeTruth:
        return cls(
            episode_index=int(d["episode_index"]),
            task=str(d["task"]),
            subtasks=[Subtask(**s) for s in d["subtasks"]],
            gripper_events=[GripperEvent(**e) for e in d["gripper_events"]],
            boxes=d.get("boxes", {}),
            interjections=[Interjection(**i) for i in d.get("interjections", [])],
            scene=RecordedScene(**d["scene"]) if "scene" in d else None,
            outcome=Outcome.from_dict(d["outcome"]) if "outcome" in d else None,
        )


def subtask_spans(starts: Sequence[tuple[int, str]], timestamps: np.ndarray) -> list[Subtask]:
    """Turn (first frame, text) pairs into gap-free spans on the frames' own timestamps."""
    ts = [float(t) for t in np.asarray(timestamps, dtype=np.float32)]
    frames = [f for f, _ in starts] + [len(ts) - 1]
    return [Subtask(ts[frames[i]], ts[frames[i + 1]], text) for i, (_, text) in enumerate(starts)]


def gripper_events(gripper_pos: np.ndarray, timestamps: np.ndarray) -> list[GripperEvent]:
    """Close/open events where `gripper_pos` crosses 0.5, on the first frame past the crossing."""
    closed = np.asarray(gripper_pos) >= 0.5
    changes = np.flatnonzero(closed[1:] != closed[:-1]) + 1
    ts = np.asarray(timestamps, dtype=np.float32)
    return [GripperEvent(float(ts[i]), int(i), "close" if closed[i] else "open") for i in changes.tolist()]


def write_ground_truth(
    root: Path,
    fps: int,
    cameras: dict[str, tuple[int, int]],
    episodes: list[EpisodeTruth],
    difficulty: str = "easy",
) -> Path:
    """Write the sidecar atomically; `cameras` maps each camera key to its (width, height)."""
    doc: dict[str, Any] = {
        "version": _FORMAT_VERSION,
        "fps": fps,
        "gripper_pos": "0 = open, 1 = closed; events at the 0.5 crossing",
        "box_format": "[x0, y0, x1, y1] pixels, x1 and y1 exclusive",
        "cameras": {k: {"width": w, "height": h} for k, (w, h) in cameras.items()},
        "episodes": [e.to_dict() for e in episodes],
    }
    if difficulty != "easy":
        doc["difficulty"] = difficulty
    path = Path(root) / GROUND_TRUTH_PATH
    # Compact: boxes for every frame of every camera make an indented file several times larger.
    atomic_write_bytes(path, (json.dumps(doc, separators=(",", ":")) + "\n").encode("utf-8"))
    return path


def read_ground_truth(root: Path) -> dict[int, EpisodeTruth]:
    """episode_index -> its truth, for a dataset made by `generate_synthetic`."""
    path = Path(root) / GROUND_TRUTH_PATH
    if not path.is_file():
        raise DatasetNotFoundError(f"{path} does not exist: only synthetic datasets carry ground truth")
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        return {e.episode_index: e for e in map(EpisodeTruth.from_dict, doc["episodes"])}
    except (ValueError, KeyError, TypeError) as exc:
        raise CorruptDatasetError(f"{path} is not a valid ground-truth file: {exc}") from exc


def carry_ground_truth(
    target: Path, cameras: Sequence[str], sources: Sequence[tuple[Path, Mapping[int, int]]]
) -> int:
    """Write the ground truth of a dataset made from synthetic ones (by LeRobot's dataset tools, which
    do not copy this file): each source root with its `target episode -> source episode` map.

    Entries are copied as stored (so fields this version does not know survive), renumbered, and
    keep the boxes of the target's `cameras` only. Returns the number of episodes written; 0 writes
    nothing (no source has ground truth for those episodes).
    """
    episodes: dict[int, dict[str, Any]] = {}
    head: dict[str, Any] | None = None
    for root, mapping in sources:
        path = Path(root) / GROUND_TRUTH_PATH
        if not mapping or not path.is_file():
            continue
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
            stored = {int(e["episode_index"]): e for e in doc["episodes"]}
        except (ValueError, KeyError, TypeError) as exc:
            raise CorruptDatasetError(f"{path} is not a valid ground-truth file: {exc}") from exc
        if head is None:
            head = {k: v for k, v in doc.items() if k != "episodes"}
        elif doc.get("fps") != head.get("fps"):
            raise CorruptDatasetError(f"{path} is at {doc.get('fps')} fps, the first source at {head.get('fps')}")
        for mine, theirs in mapping.items():
            if theirs in stored and mine not in episodes:
                entry = dict(stored[theirs], episode_index=mine)
                entry["boxes"] = {k: v for k, v in (entry.get("boxes") or {}).items() if k in cameras}
                episodes[mine] = entry
    if head is None or not episodes:
        return 0
    head["cameras"] = {k: v for k, v in (head.get("cameras") or {}).items() if k in cameras}
    doc = {**head, "episodes": [episodes[i] for i in sorted(episodes)]}
    atomic_write_bytes(Path(target) / GROUND_TRUTH_PATH, (json.dumps(doc, separators=(",", ":")) + "\n").encode())
    return len(episodes)
