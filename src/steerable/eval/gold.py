"""Labelled spans per episode, from wherever they come: a dataset's subtask rows, gold files, ground truth.

Gold files use the WGO-Bench row shape, one row per episode:
`{"episode_index": 3 | "video": "episode_000003.mp4", "instruction": "...",
  "segments": [{"start_sec": 0.0, "end_sec": 2.5, "subtask": "pick up the cup"}, ...]}`
as a JSON list (or one object) or as JSONL, one row a line. A dataset's `subtask` persistent rows give
gap-free spans: each from its row's timestamp to the next one's, the last to the episode's last frame.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple, TypeGuard

from steerable.dataset import LeRobotDataset, open_dataset
from steerable.dataset.hub import looks_like_repo_id
from steerable.dataset.lineage import no_ground_truth
from steerable.errors import ConfigError, DatasetError, DatasetNotFoundError
from steerable.language.rows import rows_from_arrow
from steerable.language.styles import LANGUAGE_PERSISTENT

__all__ = [
    "EpisodeSegments",
    "Gold",
    "Segment",
    "dataset_segments",
    "ground_truth_segments",
    "persistent_rows",
    "read_gold",
    "read_gold_file",
    "subtask_segments",
]


class Segment(NamedTuple):
    start: float
    end: float
    label: str


EpisodeSegments = dict[int, list[Segment]]


@dataclass
class Gold:
    """Segments per episode and where they came from (`kind`: file, dataset or ground truth)."""

    segments: EpisodeSegments
    source: str
    kind: str
    empty_episodes: list[int] = field(default_factory=list)


def read_gold(source: str | Path) -> Gold:
    """A gold JSON/JSONL file, or an annotated dataset (local folder or Hub id) whose subtasks are gold."""
    path = Path(source).expanduser()
    if path.is_dir():
        return _dataset_gold(open_dataset(path))
    if path.is_file():
        return Gold(read_gold_file(path), str(path), "file")
    if isinstance(source, str) and looks_like_repo_id(source) and not path.suffix:
        return _dataset_gold(open_dataset(source))
    raise DatasetNotFoundError(f"gold {source} does not exist: give a JSON/JSONL file or an annotated dataset")


def _dataset_gold(ds: LeRobotDataset) -> Gold:
    segments, empty = dataset_segments(ds)
    if not segments:
        raise DatasetError(f"the gold dataset {ds.root} has no subtask rows in any episode")
    return Gold(segments, str(ds.root), "dataset", empty)


def ground_truth_segments(ds: LeRobotDataset) -> Gold:
    """The true subtask spans a synthetic dataset keeps in meta/steerable_ground_truth.json."""
    from steerable.synthetic import read_ground_truth

    try:
        truth = read_ground_truth(ds.root)
    except FileNotFoundError as exc:
        raise DatasetError(no_ground_truth(ds.root, otherwise="pass --gold FILE_OR_DATASET")) from exc
    segments = {i: [Segment(s.start, s.end, s.text) for s in t.subtasks] for i, t in truth.items()}
    return Gold(segments, f"{ds.root} (synthetic ground truth)", "ground_truth")


def persistent_rows(ds: LeRobotDataset) -> Iterator[tuple[int, list[dict[str, Any]], float]]:
    """(episode index, its persistent language rows, its last frame's timestamp) for every episode."""
    if LANGUAGE_PERSISTENT not in ds.features:
        raise DatasetError(f"{ds.root} has no language rows to evaluate: annotate it first")
    for ep in ds.episodes:
        table = ds.read_episode(ep.episode_index, [LANGUAGE_PERSISTENT, "timestamp"])
        if table.num_rows == 0:
            yield ep.episode_index, [], 0.0
            continue
        rows = rows_from_arrow(table.column(LANGUAGE_PERSISTENT).slice(0, 1))[0]
        yield ep.episode_index, rows, float(table.column("timestamp")[-1].as_py())


def subtask_segments(rows: Iterable[dict[str, Any]], end: float) -> list[Segment]:
    """Gap-free spans of the `subtask` rows: each to the next one's timestamp, the last to `end`."""
    subtasks = sorted(
        (float(r["timestamp"]), str(r.get("content") or "")) for r in rows if r.get("style") == "subtask"
    )
    if not subtasks:
        return []
    bounds = [t for t, _ in subtasks] + [max(end, subtasks[-1][0])]
    return [Segment(bounds[i], bounds[i + 1], text) for i, (_, text) in enumerate(subtasks)]


def dataset_segments(ds: LeRobotDataset) -> tuple[EpisodeSegments, list[int]]:
    """Spans of each episode's `subtask` rows, and the episodes that have none."""
    out: EpisodeSegments = {}
    empty: list[int] = []
    for episode, rows, end in persistent_rows(ds):
        segments = subtask_segments(rows, end)
        if segments:
            out[episode] = segments
        else:
            empty.append(episode)
    return out, empty


def read_gold_file(path: Path) -> EpisodeSegments:
    """Rows of a JSON (list or one object) or JSONL file; errors name the file and the line or row."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read gold file {path}: {exc}") from exc
    located: list[tuple[str, Any]] = []
    suffix = path.suffix.lower()
    if suffix == ".json":
        try:
            json.loads(text)
        except ValueError as exc:
            where = f"{path}:{exc.lineno}:{exc.colno}" if isinstance(exc, json.JSONDecodeError) else str(path)
            raise ConfigError(f"{where}: not valid JSON ({getattr(exc, 'msg', exc)})") from None
    if suffix in (".jsonl", ".ndjson") or (suffix != ".json" and not _parses_as_json(text)):
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                located.append((f"{path}:{number}", json.loads(line)))
            except ValueError as exc:
                raise ConfigError(f"{path}:{number}: not valid JSON ({exc.args[0].split(':')[0]})") from None
    else:
        doc = json.loads(text)
        rows = doc if isinstance(doc, list) else [doc]
        located = [(f"{path}: row {i}", row) for i, row in enumerate(rows)]
    if not located:
        raise ConfigError(f"gold file {path} holds no rows")
    out: EpisodeSegments = {}
    for where, row in located:
        episode, segments = _parse_row(row, where)
        if episode in out:
            raise ConfigError(f"{where}: episode {episode} appears twice in the gold file")
        out[episode] = segments
    return out


def _parses_as_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def _parse_row(row: Any, where: str) -> tuple[int, list[Segment]]:
    if not isinstance(row, dict):
        raise ConfigError(f"{where}: a row must be an object with episode_index (or video) and segments")
    episode = _episode_of(row, where)
    segments = row.get("segments")
    if not isinstance(segments, list):
        raise ConfigError(f"{where}: 'segments' must be a list of {{start_sec, end_sec, subtask}}")
    out = []
    for k, seg in enumerate(segments):
        if not isinstance(seg, dict):
            raise ConfigError(f"{where}: segments[{k}] must be an object with start_sec, end_sec, subtask")
        start, end, label = seg.get("start_sec"), seg.get("end_sec"), seg.get("subtask")
        if not (_is_number(start) and _is_number(end)):
            raise ConfigError(f"{where}: segments[{k}] needs numeric start_sec and end_sec")
        if not 0 <= start < end:
            raise ConfigError(f"{where}: segments[{k}] must have 0 <= start_sec < end_sec, got {start}..{end}")
        if not isinstance(label, str):
            raise ConfigError(f"{where}: segments[{k}] needs a 'subtask' text")
        out.append(Segment(float(start), float(end), label))
    return episode, sorted(out)


def _episode_of(row: dict[str, Any], where: str) -> int:
    if "episode_index" in row:
        value = row["episode_index"]
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ConfigError(f"{where}: episode_index must be a non-negative integer, got {value!r}")
        return value
    video = row.get("video")
    if isinstance(video, str):
        name = Path(video).stem
        found = re.search(r"episode[_-]?(\d+)", name) or re.fullmatch(r"(\d+)", name)
        if found:
            return int(found.group(1))
        raise ConfigError(f"{where}: cannot tell the episode of video {video!r}: add an episode_index")
    raise ConfigError(f"{where}: a row needs episode_index (or a video named like episode_000003.mp4)")


def _is_number(x: Any) -> TypeGuard[float]:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
