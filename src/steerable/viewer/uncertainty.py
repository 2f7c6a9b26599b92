"""Which episodes to review first: an ordering by how much the evidence about each one disagrees.

Five signals, each in [0, 1], summed into the episode's score (higher: look at it sooner):

- `far`: the share of subtask boundaries farther than `FAR_S` from every motion keystate (gripper
  close/open, pauses; `steerable.motion`, the rules behind the motion rows);
- `length`: the share of subtask spans shorter than a third or longer than three times the dataset's
  median subtask span;
- `notes`: the annotate run's notes and failures for the episode (its staging markers and run
  summary under `.steerable/`), a third per note, at most 1;
- `vqa`: VQA questions whose answer was dropped (staging meta) or is missing from the rows, half per
  question, at most 1;
- `disagree`: where other annotations of the same episodes are given (another model, prompt or run:
  `steerable view --against OTHER`), 1 minus the boundary F1 of the two subtask segmentations at
  `FAR_S` tolerance (as `steerable eval --compare` matches boundaries), the worst over the others.

An episode without any subtask row scores 1 for `length` (there is nothing to trust). Each signal
that counts comes with a one-line reason, shown in the episode list.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from steerable.dataset import LeRobotDataset
from steerable.dataset.frames import feature_matrix
from steerable.dataset.layout import WORK_DIR_NAME
from steerable.dataset.parquet import read_parquet
from steerable.errors import SteerableError
from steerable.eval.metrics import boundary_matches
from steerable.language.rows import rows_from_arrow
from steerable.language.styles import LANGUAGE_EVENTS, LANGUAGE_PERSISTENT
from steerable.motion import MotionParams, detect_keystates, find_dims

__all__ = ["FAR_S", "keystate_times", "subtask_starts", "uncertainty"]

logger = logging.getLogger(__name__)

FAR_S = 0.5
_GROUPED = re.compile(r"\((?:\d+ times in )?\d+ episodes?: ([0-9, \-]+)\)$")


def keystate_times(ds: LeRobotDataset, episode_index: int) -> list[float]:
    """The motion keystates of one episode (seconds), [] when its state has none or cannot be read."""
    try:
        params = MotionParams()
        dims = find_dims(ds.features, params, ds.stats)
        if dims.state_key is None:
            return []
        table = ds.read_episode(episode_index, ["timestamp", dims.state_key])
        stamps = table.column("timestamp").to_numpy().astype(np.float64)
        state = feature_matrix(table, dims.state_key).astype(np.float64)
        return [float(k.time) for k in detect_keystates(stamps, state, dims, params)]
    except (SteerableError, ValueError, KeyError, IndexError) as exc:
        logger.debug("episode %d: no keystates (%s)", episode_index, exc)
        return []


def subtask_starts(ds: LeRobotDataset) -> dict[int, list[float]]:
    """Every episode's subtask row timestamps, sorted (one read of the persistent column per data file)."""
    out: dict[int, list[float]] = {e.episode_index: [] for e in ds.episodes}
    if LANGUAGE_PERSISTENT not in ds.features:
        return out
    for path in ds.data_files():
        table = read_parquet(path, ["episode_index", LANGUAGE_PERSISTENT])
        episodes = table.column("episode_index").to_numpy()
        _, first = np.unique(episodes, return_index=True)
        for i, rows in zip(first, rows_from_arrow(table.column(LANGUAGE_PERSISTENT).take(first)), strict=True):
            out[int(episodes[i])] = sorted(float(r.get("timestamp") or 0.0) for r in rows
                                           if r.get("style") == "subtask")
    return out


def _vqa_unanswered(ds: LeRobotDataset) -> dict[int, int]:
    """Questions without an answer row in the stored events, per episode."""
    out: dict[int, int] = {}
    if LANGUAGE_EVENTS not in ds.features:
        return out
    for path in ds.data_files():
        table = read_parquet(path, ["episode_index", LANGUAGE_EVENTS])
        episodes = table.column("episode_index").to_numpy()
        for ep, rows in zip(episodes, rows_from_arrow(table.column(LANGUAGE_EVENTS)), strict=True):
            asked = {r.get("camera") for r in rows if r.get("style") == "vqa" and r.get("role") == "user"}
            answered = {r.get("camera") for r in rows if r.get("style") == "vqa" and r.get("role") != "user"}
            if asked - answered:
                out[int(ep)] = out.get(int(ep), 0) + len(asked - answered)
    return out


def _episode_numbers(text: str) -> list[int]:
    out: list[int] = []
    for part in text.split(","):
        a, _, b = part.strip().partition("-")
        if a.isdigit():
            out.extend(range(int(a), int(b or a) + 1))
    return out


def run_notes(root: Path) -> tuple[dict[int, int], dict[int, int]]:
    """(notes, dropped VQA answers) per episode, from the last annotate run's files under `.steerable/`."""
    notes: dict[int, int] = {}
    dropped: dict[int, int] = {}
    work = root / WORK_DIR_NAME
    for marker in sorted((work / "staging").glob("episode_*/*.done.json")):
        try:
            ep = int(marker.parent.name.split("_")[1])
            body = json.loads(marker.read_text(encoding="utf-8"))
        except (OSError, ValueError, IndexError):
            continue
        notes[ep] = notes.get(ep, 0) + len(body.get("notes") or [])
        meta = body.get("meta") or {}
        if isinstance(meta, dict) and isinstance(meta.get("dropped"), int):
            dropped[ep] = dropped.get(ep, 0) + meta["dropped"]
    try:
        summary = json.loads((work / "run_summary.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        summary = {}
    for failure in summary.get("failures") or []:
        if isinstance(failure, dict) and isinstance(failure.get("episode_index"), int):
            notes[failure["episode_index"]] = notes.get(failure["episode_index"], 0) + 1
    if not any(notes.values()):  # no staging markers: the grouped notes of the summary name episodes
        for note in summary.get("notes") or []:
            m = _GROUPED.search(str(note))
            for ep in _episode_numbers(m.group(1)) if m else []:
                notes[ep] = notes.get(ep, 0) + 1
    return notes, dropped


def _f1(a: Sequence[float], b: Sequence[float]) -> float:
    if not a and not b:
        return 1.0
    if not a or not b:
        return 0.0
    hit = boundary_matches(list(a), list(b), FAR_S)
    return 2 * hit / (len(a) + len(b))


def uncertainty(
    ds: LeRobotDataset,
    keystates: Mapping[int, Sequence[float]],
    *,
    against: Sequence[tuple[str, Mapping[int, Sequence[float]]]] = (),
    episodes: Sequence[int] | None = None,
) -> list[dict[str, Any]]:
    """Per episode its score, signals and reasons, least certain first (ties: by episode index).

    `keystates`: episode -> keystate times; `against`: (name, episode -> subtask starts) of other
    annotations of the same episodes.
    """
    starts = subtask_starts(ds)
    notes, dropped = run_notes(ds.root)
    unanswered = _vqa_unanswered(ds)
    wanted = [e.episode_index for e in ds.episodes] if episodes is None else list(episodes)
    spans: dict[int, list[float]] = {}
    for ep in wanted:
        s = starts.get(ep, [])
        end = ds.episode(ep).length / ds.fps
        spans[ep] = [b - a for a, b in zip(s, [*s[1:], end], strict=True)] if s else []
    every = [d for ep in wanted for d in spans[ep] if d > 0]
    median = float(np.median(every)) if every else 0.0
    out: list[dict[str, Any]] = []
    for ep in wanted:
        reasons: list[str] = []
        signals: dict[str, float] = {}
        cuts = [t for t in starts.get(ep, []) if t > 1e-6]
        keys = list(keystates.get(ep, []))
        if cuts and keys:
            far = [t for t in cuts if min(abs(t - k) for k in keys) > FAR_S]
            signals["far"] = len(far) / len(cuts)
            if far:
                reasons.append(f"{len(far)} of {len(cuts)} subtask boundaries over {FAR_S:g} s from any keystate")
        if not starts.get(ep):
            signals["length"] = 1.0
            reasons.append("no subtask rows")
        elif median > 0:
            odd = [d for d in spans[ep] if d < median / 3 or d > median * 3]
            signals["length"] = len(odd) / len(spans[ep])
            if odd:
                reasons.append(f"{len(odd)} subtask span(s) far from the usual {median:.1f} s "
                               f"({', '.join(f'{d:.1f} s' for d in odd[:3])})")
        if notes.get(ep):
            signals["notes"] = min(1.0, notes[ep] / 3)
            reasons.append(f"{notes[ep]} annotate note(s) or failure(s)")
        lost = dropped.get(ep, 0) + unanswered.get(ep, 0)
        if lost:
            signals["vqa"] = min(1.0, lost / 2)
            reasons.append(f"{lost} VQA answer(s) dropped")
        worst: tuple[float, str] | None = None
        for name, other in against:
            if ep not in other:
                continue
            f1 = _f1(cuts, [t for t in other[ep] if t > 1e-6])
            if worst is None or 1 - f1 > worst[0]:
                worst = (1 - f1, name)
        if worst is not None:
            signals["disagree"] = worst[0]
            if worst[0] > 0:
                reasons.append(f"boundaries disagree with {worst[1]} (F1 {1 - worst[0]:.2f})")
        score = round(sum(signals.values()), 4)
        out.append({"episode_index": ep, "score": score, "signals": {k: round(v, 4) for k, v in signals.items()},
                    "reasons": reasons})
    out.sort(key=lambda r: (-r["score"], r["episode_index"]))
    return out
