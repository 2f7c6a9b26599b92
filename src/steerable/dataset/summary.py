"""A dataset's vital statistics for `steerable info`: totals, cameras, features, tasks, language.

The summary is a typed object; `to_json()` makes the JSON the command prints with `--json`.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from steerable.dataset.lerobot import LeRobotDataset
from steerable.dataset.lineage import missing_metadata
from steerable.dataset.parquet import file_metadata, read_parquet
from steerable.dataset.provenance import recorded_producers
from steerable.dataset.ranges import index_ranges
from steerable.dataset.review import human_edits
from steerable.language.styles import LANGUAGE_EVENTS, LANGUAGE_PERSISTENT

__all__ = [
    "CameraSummary",
    "DatasetSummary",
    "EpisodeSummary",
    "FeatureSummary",
    "LanguageSummary",
    "index_ranges",
    "producers_of",
    "summarize",
]


@dataclass
class CameraSummary:
    codec: str | None
    width: int | None
    height: int | None
    files_present: int | None = None
    files_expected: int | None = None
    missing_episodes: list[int] = field(default_factory=list)  # episodes whose video file is absent


@dataclass
class FeatureSummary:
    dtype: str | None
    shape: list[int]


@dataclass
class EpisodeSummary:
    episode_index: int
    length: int
    tasks: list[str]


@dataclass
class LanguageSummary:
    persistent: dict[str, int]  # style -> rows (once per episode)
    events: dict[str, int]  # style -> rows ('tool_call' for style-less rows)
    tools: list[str]


@dataclass
class DatasetSummary:
    root: str
    codebase_version: str
    robot_type: str | None
    fps: int
    total_episodes: int
    total_frames: int
    total_tasks: int
    cameras: dict[str, CameraSummary]
    features: dict[str, FeatureSummary]
    tasks: list[str]
    episodes: list[EpisodeSummary]
    language: LanguageSummary | None
    producers: dict[str, str] = field(default_factory=dict)  # style -> model id or 'heuristic:<module>'
    human: dict[str, list[int]] = field(default_factory=dict)  # style -> episodes a person edited (`view --edit`)
    review: dict[str, int] = field(default_factory=dict)  # review status -> episodes, once anything was reviewed
    video_folder_hint: str | None = None  # a likely misnamed videos folder, when files are missing
    # steerable metadata a dataset with language lacks (LeRobot's dataset tools drop it), as phrases
    missing_metadata: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def producers_of(ds: LeRobotDataset) -> dict[str, str]:
    """Who wrote each language style, as recorded in `meta/steerable_provenance.json` (or an older
    steerable's `meta/info.json` key; empty when not recorded)."""
    return recorded_producers(ds.root, ds.info)


def summarize(ds: LeRobotDataset) -> DatasetSummary:
    """Reads only metadata, the language columns and the video files' existence."""
    cameras = _cameras(ds)
    missing = any(c.missing_episodes for c in cameras.values())
    language = _language(ds)
    styles = [*language.persistent, *language.events] if language is not None else []
    return DatasetSummary(
        root=str(ds.root),
        codebase_version=ds.info.codebase_version,
        robot_type=ds.info.robot_type,
        fps=ds.fps,
        total_episodes=len(ds.episodes),
        total_frames=ds.total_frames,
        total_tasks=len(ds.tasks),
        cameras=cameras,
        features={
            name: FeatureSummary(f.get("dtype"), list(f.get("shape") or [])) for name, f in ds.features.items()
        },
        tasks=[ds.tasks[i] for i in sorted(ds.tasks)],
        episodes=[EpisodeSummary(e.episode_index, e.length, list(e.tasks)) for e in ds.episodes],
        language=language,
        producers=producers_of(ds),
        human=human_edits(ds),
        review=_review_counts(ds),
        video_folder_hint=_video_folder_hint(ds) if missing else None,
        missing_metadata=missing_metadata(ds, styles),
    )


def _review_counts(ds: LeRobotDataset) -> dict[str, int]:
    from steerable.dataset.review import review_status
    from steerable.dataset.review_records import REVIEW_STATUSES, UNREVIEWED

    status = review_status(ds)
    if not status:
        return {}
    counts: dict[str, int] = {s: sum(v == s for v in status.values()) for s in REVIEW_STATUSES if s != UNREVIEWED}
    return {UNREVIEWED: len(ds.episodes) - len(status), **counts}


def _cameras(ds: LeRobotDataset) -> dict[str, CameraSummary]:
    out: dict[str, CameraSummary] = {}
    for key in ds.camera_keys:
        feature = ds.features[key]
        vinfo = feature.get("info") or {}
        shape = list(feature.get("shape") or [])
        entry = CameraSummary(
            codec=vinfo.get("video.codec"),
            width=vinfo.get("video.width") or (shape[1] if len(shape) == 3 else None),
            height=vinfo.get("video.height") or (shape[0] if len(shape) == 3 else None),
        )
        if ds.episodes:
            paths = {ep.episode_index: ds.video_path(key, ep) for ep in ds.episodes if key in ep.videos}
            present = {p: p.is_file() for p in set(paths.values())}
            entry.files_present = sum(present.values())
            entry.files_expected = len(present)
            entry.missing_episodes = sorted(i for i, p in paths.items() if not present[p])
        out[key] = entry
    return out


def _video_folder_hint(ds: LeRobotDataset) -> str | None:
    """A sibling folder that probably holds the videos under another name (`video/` for `videos/`)."""
    template = ds.info.video_path or ""
    expected = template.split("/", 1)[0]
    if not expected or (ds.root / expected).is_dir():
        return None
    for candidate in sorted(p for p in ds.root.iterdir() if p.is_dir()):
        name = candidate.name.lower()
        if name != expected and ("video" in name or any(candidate.rglob("*.mp4"))):
            return (
                f"the videos are expected under {expected}/ (info.json video_path) but {candidate.name}/ "
                f"exists: rename it to {expected}/"
            )
    return None


def _language(ds: LeRobotDataset) -> LanguageSummary | None:
    persistent: Counter[str] = Counter()
    events: Counter[str] = Counter()
    found = False
    for path in ds.data_files():
        names = file_metadata(path).schema.to_arrow_schema().names
        cols = [c for c in ("episode_index", LANGUAGE_PERSISTENT, LANGUAGE_EVENTS) if c in names]
        if len(cols) == 1:
            continue
        found = True
        table = read_parquet(path, cols)
        if LANGUAGE_PERSISTENT in cols:
            # The episode's whole list repeats on every frame: count it once per episode.
            first_rows = _first_row_per_episode(table.column("episode_index"))
            persistent.update(_styles(table.column(LANGUAGE_PERSISTENT).take(first_rows)))
        if LANGUAGE_EVENTS in cols:
            events.update(_styles(table.column(LANGUAGE_EVENTS)))
    if not found and not ds.has_language:
        return None
    return LanguageSummary(
        persistent=dict(sorted(persistent.items())),
        events=dict(sorted(events.items())),
        tools=[str(t.get("function", {}).get("name")) for t in ds.tools],
    )


def _first_row_per_episode(episode_index: pa.ChunkedArray) -> pa.Array:
    values = episode_index.to_numpy()
    starts = [0] + [i for i in range(1, len(values)) if values[i] != values[i - 1]]
    return pa.array(starts, pa.int64())


def _styles(column: pa.ChunkedArray | pa.Array) -> Counter[str]:
    """Count rows by style; style-less rows (tool-call atoms) count as 'tool_call'."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    rows = pc.list_flatten(column)
    if len(rows) == 0:
        return Counter()
    styles = pc.fill_null(pc.struct_field(rows, "style"), "tool_call")
    counts = pc.value_counts(styles).to_pylist()
    return Counter({c["values"]: int(c["counts"]) for c in counts})
