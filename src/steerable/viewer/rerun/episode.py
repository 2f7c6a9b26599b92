"""Log one episode to a Rerun recording: cameras, state/action plots and the language rows."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from steerable.dataset import EpisodeMeta, LeRobotDataset
from steerable.errors import SteerableError
from steerable.language.rows import PersistentRow
from steerable.language.styles import PERSISTENT_STYLE_ORDER
from steerable.viewer.clips import browser_playable, cut_clip, remux_clip
from steerable.viewer.episodes import episode_language, event_kind, speech_text, vqa_overlays

__all__ = [
    "FRAME_TIMELINE",
    "TIME_TIMELINE",
    "WHOLE_FILE_MAX_BYTES",
    "EpisodeLog",
    "VideoMode",
    "camera_entity",
    "camera_name",
    "log_episode",
    "plot_features",
]

logger = logging.getLogger(__name__)

VideoMode = Literal["asset", "frames"]
FRAME_TIMELINE = "frame_index"
TIME_TIMELINE = "time"
_FRAME_COLUMNS = frozenset({"timestamp", "frame_index", "episode_index", "index", "task_index"})
_NUMERIC = frozenset({"float16", "float32", "float64", "int8", "int16", "int32", "int64", "bool"})
_COLORS = {"interjection": (230, 120, 40), "speech": (60, 150, 230), "vqa": (150, 90, 210), "tool": (120, 120, 120)}
# A multi-episode mp4 whose episodes do not start on keyframes is embedded whole (referenced at the
# episode's from_timestamp) up to this size; larger ones get the episode re-encoded to H.264.
WHOLE_FILE_MAX_BYTES = 64 * 1024 * 1024
_VQA_SHOWN_S = 1.0  # a VQA box stays on its camera this long (as in the web viewer)


@dataclass
class EpisodeLog:
    """What was logged for one episode (the CLI prints it; tests read it)."""

    episode_index: int
    frames: int
    cameras: dict[str, str] = field(default_factory=dict)  # camera key -> how its video was logged
    language_rows: int = 0


def camera_name(key: str) -> str:
    """`observation.images.top` -> `top` (the entity name of a camera)."""
    short = key.removeprefix("observation.images.").removeprefix("observation.")
    return short or key


def camera_entity(key: str) -> str:
    return f"cameras/{camera_name(key)}"


def plot_features(ds: LeRobotDataset) -> list[str]:
    """Numeric per-frame features (state, action, ...) other than the bookkeeping columns."""
    out = []
    for key, feature in ds.features.items():
        shape = feature.get("shape") or [1]
        if key in _FRAME_COLUMNS or feature.get("dtype") not in _NUMERIC or len(shape) != 1:
            continue
        out.append(key)
    return out


def _dim_names(feature: Mapping[str, Any], dims: int) -> list[str]:
    names: Any = feature.get("names")
    if isinstance(names, Mapping):  # {"motors": [...]}, LeRobot's older spelling
        names = next(iter(names.values()), None)
    if isinstance(names, list) and len(names) == dims and all(isinstance(n, str) for n in names):
        return list(names)
    return [str(i) for i in range(dims)]


def _matrix(column: pa.ChunkedArray, rows: int) -> np.ndarray:
    """A list-valued (or scalar) column as a rows x dims float64 array."""
    if pa.types.is_list(column.type) or pa.types.is_fixed_size_list(column.type) or pa.types.is_large_list(
        column.type
    ):
        flat = pc.list_flatten(column).to_numpy(zero_copy_only=False).astype(np.float64)
        return flat.reshape(rows, -1) if rows else flat.reshape(0, 1)
    return column.to_numpy(zero_copy_only=False).astype(np.float64).reshape(rows, 1)


def log_episode(
    rr: Any, rec: Any, ds: LeRobotDataset, ep: EpisodeMeta, *, video: VideoMode = "asset", scratch: Path
) -> EpisodeLog:
    """Log `ep` to the recording `rec` (`rr` is the imported rerun module; `scratch`: a folder for clips)."""
    plots = plot_features(ds)
    table = ds.read_episode(ep.episode_index, ["timestamp", "frame_index", *plots])
    stamps = table.column("timestamp").to_numpy().astype(np.float64)
    frames = table.column("frame_index").to_numpy().astype(np.int64)
    result = EpisodeLog(ep.episode_index, len(frames))
    index = _Index(rr, stamps, frames)
    rec.log("language/task", rr.TextDocument(ds.task_of(ep)), static=True)
    for camera in ds.camera_keys:
        result.cameras[camera] = _log_camera(rr, rec, ds, ep, camera, index, video, scratch)
    for key in plots:
        values = _matrix(table.column(key), len(frames))
        entity = f"plots/{key}"
        rec.log(entity, rr.SeriesLines(names=_dim_names(ds.features[key], values.shape[1])), static=True)
        rec.send_columns(entity, indexes=index.columns(), columns=rr.Scalars.columns(scalars=values))
    persistent, events, _ = episode_language(ds, ep)
    result.language_rows = _log_persistent(rr, rec, persistent, index) + _log_events(rr, rec, events, index, ds.fps)
    return result


class _Index:
    """The episode's frames on both timelines, and the frame a language timestamp falls on."""

    def __init__(self, rr: Any, stamps: np.ndarray, frames: np.ndarray) -> None:
        self.rr, self.stamps, self.frames = rr, stamps, frames

    def columns(self, rows: Sequence[int] | None = None) -> list[Any]:
        pick = slice(None) if rows is None else np.asarray(rows, dtype=np.int64)
        return [
            self.rr.TimeColumn(FRAME_TIMELINE, sequence=self.frames[pick]),
            self.rr.TimeColumn(TIME_TIMELINE, duration=self.stamps[pick]),
        ]

    def row_at(self, t: float) -> int:
        """The frame whose timestamp is nearest to `t` (rows are written on a frame's own stamp)."""
        if not len(self.stamps):
            return 0
        i = int(np.searchsorted(self.stamps, t))
        if i >= len(self.stamps) or (i > 0 and t - self.stamps[i - 1] <= self.stamps[i] - t):
            i -= 1
        return max(i, 0)

    def set(self, rec: Any, row: int, t: float | None = None) -> None:
        rec.set_time(FRAME_TIMELINE, sequence=int(self.frames[row]))
        rec.set_time(TIME_TIMELINE, duration=float(self.stamps[row] if t is None else t))


def _log_camera(
    rr: Any, rec: Any, ds: LeRobotDataset, ep: EpisodeMeta, camera: str, index: _Index, video: VideoMode,
    scratch: Path,
) -> str:
    entity = camera_entity(camera)
    try:
        path = ds.video_path(camera, ep)
        if not path.is_file():
            raise FileNotFoundError(path)
    except (SteerableError, OSError) as exc:
        logger.warning("episode %d: no video for %s (%s)", ep.episode_index, camera, exc)
        rec.log(entity, rr.TextLog(f"no video for {camera}", level="WARN"), static=True)
        return "missing"
    span = ep.videos[camera]
    if video == "frames":
        pictures = ds.decode_frames(ep.episode_index, camera, index.stamps.tolist())
        for row, picture in enumerate(pictures):
            index.set(rec, row)
            rec.log(entity, rr.Image(picture))
        return "frames"
    shared = sum(
        1 for e in ds.episodes
        if (s := e.videos.get(camera)) is not None
        and (s.chunk_index, s.file_index) == (span.chunk_index, span.file_index)
    )
    playable = browser_playable(path)  # Rerun decodes the same codecs (H.264, H.265, AV1, VP8/9)
    clip = scratch / f"{camera_name(camera)}_{ep.episode_index:06d}.mp4"
    if playable and shared == 1:
        source, offset, how = path, span.from_timestamp, "file"
    elif playable and remux_clip(path, clip, span.from_timestamp, span.to_timestamp, ds.fps) is not None:
        source, offset, how = clip, 0.0, "remuxed clip"  # the episode's own GOPs, packets copied
    elif playable and path.stat().st_size <= WHOLE_FILE_MAX_BYTES:
        source, offset, how = path, span.from_timestamp, "shared file"  # not GOP-aligned: no lossy re-encode
    else:
        cut_clip(path, clip, span.from_timestamp, span.to_timestamp, ds.fps)
        source, offset, how = clip, 0.0, "re-encoded clip"
    asset = rr.AssetVideo(path=source)
    rec.log(entity, asset, static=True)
    nanos = np.asarray(asset.read_frame_timestamps_nanos(), dtype=np.int64)
    if not len(nanos):
        logger.warning("episode %d: %s holds no frames", ep.episode_index, source)
        return "empty"
    want = np.round((offset + index.stamps) * 1e9).astype(np.int64)
    right = np.clip(np.searchsorted(nanos, want), 0, len(nanos) - 1)
    left = np.clip(right - 1, 0, len(nanos) - 1)
    nearest = np.where(np.abs(nanos[left] - want) <= np.abs(nanos[right] - want), left, right)
    rec.send_columns(entity, indexes=index.columns(), columns=rr.VideoFrameReference.columns_nanos(nanos[nearest]))
    return how


def _log_persistent(rr: Any, rec: Any, rows: Sequence[PersistentRow], index: _Index) -> int:
    """Each persistent style: a TextDocument + StateChange per distinct timestamp (rows there joined)."""
    count = 0
    for style in PERSISTENT_STYLE_ORDER:  # one entity each under language/, holding until the next row
        by_time: dict[float, list[str]] = {}
        for row in rows:
            if row.get("style") == style:
                by_time.setdefault(float(row.get("timestamp") or 0.0), []).append(str(row.get("content") or ""))
                count += 1
        for t, texts in sorted(by_time.items()):
            index.set(rec, index.row_at(t), t)
            text = "\n".join(texts)
            rec.log(f"language/{style}", rr.TextDocument(text), rr.StateChange(state=text))
    return count


def _call_text(call: Any) -> str:
    function = call.get("function") if isinstance(call, Mapping) else None
    if not isinstance(function, Mapping):
        return str(call)
    args = function.get("arguments")
    return f"{function.get('name')}({args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)})"


def _log_events(rr: Any, rec: Any, events: Sequence[Mapping[str, Any]], index: _Index, fps: int) -> int:
    count = 0
    for event in events:
        row_i = index.row_at(event["t"])
        index.set(rec, row_i)
        for row in event["rows"]:
            kind = event_kind(row)
            count += 1
            if kind == "vqa":
                continue  # logged per exchange below
            if kind == "speech":
                text = speech_text(row) or ""
            elif kind == "tool":
                text = "; ".join(_call_text(c) for c in row.get("tool_calls") or [])
            else:
                text = str(row.get("content") or "")
            rec.log(f"language/{kind}", rr.TextLog(text, level=str(row.get("role") or ""), color=_COLORS.get(kind)))
    _log_vqa(rr, rec, vqa_overlays(events), index, fps)
    return count


def _log_vqa(rr: Any, rec: Any, exchanges: Sequence[Mapping[str, Any]], index: _Index, fps: int) -> None:
    """Question/answer text and the answer's boxes and points on the camera they belong to."""
    shown = max(1, int(round(_VQA_SHOWN_S * fps)))
    frames_by_camera: dict[str, list[int]] = {}
    for item in exchanges:
        frames_by_camera.setdefault(str(item.get("camera")), []).append(int(item["frame"]))
    for item in exchanges:
        camera = str(item.get("camera"))
        base = f"language/vqa/{camera_name(camera)}"
        row_i = index.row_at(item["t"])
        index.set(rec, row_i)
        question = str(item.get("question", ""))
        answer = item.get("answer")
        answer_text = answer if isinstance(answer, str) else json.dumps(answer, ensure_ascii=False)
        rec.log(base, rr.TextLog(f"Q: {question}\nA: {answer_text}", level="vqa", color=_COLORS["vqa"]))
        shapes = item.get("shapes") or []
        boxes = [s for s in shapes if s["type"] == "box"]
        points = [s for s in shapes if s["type"] == "point"]
        if boxes:
            rec.log(f"{base}/boxes", rr.Boxes2D(
                array=[s["bbox"] for s in boxes], array_format=rr.Box2DFormat.XYXY,
                labels=[f"{s['label']} · {question}" for s in boxes], colors=[_COLORS["vqa"]] * len(boxes),
            ))
        else:
            rec.log(f"{base}/boxes", rr.Clear(recursive=False))
        if points:
            rec.log(f"{base}/points", rr.Points2D(
                [s["point"] for s in points], labels=[f"{s['label']} · {question}" for s in points],
                colors=[_COLORS["vqa"]] * len(points), radii=3.0,
            ))
        else:
            rec.log(f"{base}/points", rr.Clear(recursive=False))
        frame = int(item["frame"])
        later = [f for f in frames_by_camera[camera] if frame < f <= frame + shown]
        end = index.row_at(float(index.stamps[row_i]) + _VQA_SHOWN_S)
        if not later and end > row_i:
            index.set(rec, end)
            rec.log(f"{base}/boxes", rr.Clear(recursive=False))
            rec.log(f"{base}/points", rr.Clear(recursive=False))
