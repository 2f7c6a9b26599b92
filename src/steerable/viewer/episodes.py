"""What the viewer shows of a dataset: the episode list and one episode's language as tracks.

Everything here is plain JSON-ready data; the server sends it as API replies and the static export
writes it into script files. Timestamps are episode-relative seconds, as stored in the parquet.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pyarrow.compute as pc

from steerable.dataset import EpisodeMeta, LeRobotDataset
from steerable.dataset.episode_language import episode_rows
from steerable.dataset.parquet import read_parquet
from steerable.dataset.provenance import TOOL_CALL_STYLE, is_heuristic
from steerable.language.rows import PersistentRow, event_rows_from_arrow, persistent_rows_from_arrow
from steerable.language.styles import CONTEXT_STYLES, LANGUAGE_EVENTS, LANGUAGE_PERSISTENT

__all__ = [
    "MARKER_STYLES",
    "SPAN_STYLES",
    "episode_language",
    "episode_list",
    "event_kind",
    "is_heuristic",
    "speech_text",
    "tracks",
    "vqa_overlays",
]

# Persistent styles drawn as spans (a row holds until the next row of its style), in track order.
SPAN_STYLES = (*CONTEXT_STYLES, "motion")
# Styles drawn as point markers: event rows, plus task rephrasings (all written at t=0).
MARKER_STYLES = ("interjection", "speech", "vqa", "task_aug")


def speech_text(row: Mapping[str, Any]) -> str | None:
    """The text of a row's `say` tool call, or None when it has none."""
    for call in row.get("tool_calls") or []:
        if isinstance(call, str):
            try:
                call = json.loads(call)
            except ValueError:
                continue
        function = call.get("function") if isinstance(call, Mapping) else None
        if not isinstance(function, Mapping) or function.get("name") != "say":
            continue
        args = function.get("arguments")
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except ValueError:
                return args
        if isinstance(args, Mapping):
            return str(args.get("text", ""))
    return None


def event_kind(row: Mapping[str, Any]) -> str:
    """The track an event row belongs to: its style, or "speech" for a style-less `say` call."""
    style = row.get("style")
    if style:
        return str(style)
    return "speech" if speech_text(row) is not None else "tool"


def episode_list(ds: LeRobotDataset) -> list[dict[str, Any]]:
    """Every episode with its task, length, duration and row counts per style (one pass per data file)."""
    counts: dict[int, Counter[str]] = {e.episode_index: Counter() for e in ds.episodes}
    columns = [c for c in (LANGUAGE_PERSISTENT, LANGUAGE_EVENTS) if c in ds.features]
    if columns:
        for path in ds.data_files():
            table = read_parquet(path, columns=["episode_index", *columns])
            episodes = table.column("episode_index").to_numpy()
            if LANGUAGE_PERSISTENT in columns:
                _, first = np.unique(episodes, return_index=True)
                column = table.column(LANGUAGE_PERSISTENT).take(first)
                for i, rows in zip(first, persistent_rows_from_arrow(column), strict=True):
                    counts.setdefault(int(episodes[i]), Counter()).update(r.get("style") or "" for r in rows)
            if LANGUAGE_EVENTS in columns:
                events = table.column(LANGUAGE_EVENTS)
                busy = np.flatnonzero(pc.fill_null(pc.list_value_length(events), 0).to_numpy() > 0)
                for i, said in zip(busy, event_rows_from_arrow(events.take(busy)), strict=True):
                    counts.setdefault(int(episodes[i]), Counter()).update(event_kind(r) for r in said)
    out = []
    for ep in ds.episodes:
        c = counts.get(ep.episode_index, Counter())
        # A vqa exchange is a question row and an answer row: count exchanges.
        if c.get("vqa"):
            c["vqa"] = c["vqa"] // 2 or 1
        out.append(
            {
                "episode_index": ep.episode_index,
                "task": ds.task_of(ep),
                "length": ep.length,
                "duration": round(ep.length / ds.fps, 3),
                "counts": {k: v for k, v in sorted(c.items()) if k},
            }
        )
    return out


def episode_language(
    ds: LeRobotDataset, ep: EpisodeMeta
) -> tuple[list[PersistentRow], list[dict[str, Any]], np.ndarray]:
    """The episode's persistent rows, its events grouped by frame, and every frame's timestamp: the
    dataset's one reader of it (`steerable.dataset.episode_language`), shaped for the page."""
    rows = episode_rows(ds, ep.episode_index)
    events: list[dict[str, Any]] = []
    for (t, row), frame in zip(rows.events, rows.event_frames, strict=True):
        if events and events[-1]["frame"] == frame:
            events[-1]["rows"].append(row)
        else:
            events.append({"t": t, "frame": frame, "rows": [row]})
    return rows.persistent, events, rows.timestamps.astype(np.float64)


def tracks(
    persistent: Iterable[PersistentRow],
    events: Iterable[Mapping[str, Any]],
    duration: float,
    producers: Mapping[str, str] | None = None,
    heuristic: Iterable[str] | None = None,
) -> list[dict[str, Any]]:
    """One track per style: spans for the persistent styles, markers for events and task rephrasings.

    Each track names who wrote its style in this episode (`producers`, from the provenance file:
    `steerable.dataset.provenance.Provenance.episode_producers`) and whether its rows are a
    heuristic's (`heuristic`: those styles; by default the ones whose producer is `heuristic:<module>`).
    Style-less `say` rows (the speech and tool tracks) are the producers' `tool_call` style.
    """
    by_style: dict[str, list[PersistentRow]] = {}
    for row in persistent:
        by_style.setdefault(str(row.get("style") or ""), []).append(row)
    out: list[dict[str, Any]] = []
    for style in SPAN_STYLES:
        rows = sorted(by_style.get(style, []), key=lambda r: float(r.get("timestamp") or 0.0))
        items = []
        for i, row in enumerate(rows):
            start = float(row.get("timestamp") or 0.0)
            end = float(rows[i + 1].get("timestamp") or 0.0) if i + 1 < len(rows) else duration
            items.append({"start": start, "end": max(end, start), "text": row.get("content") or ""})
        out.append({"style": style, "kind": "span", "items": items})
    markers: dict[str, list[dict[str, Any]]] = {style: [] for style in MARKER_STYLES}
    for row in by_style.get("task_aug", []):
        markers["task_aug"].append({"t": float(row.get("timestamp") or 0.0), "text": row.get("content") or ""})
    for event in events:
        for row in event["rows"]:
            kind = event_kind(row)
            if kind == "vqa" and row.get("role") != "user":
                continue  # one marker per exchange, labelled with its question
            text = speech_text(row) if kind == "speech" else row.get("content")
            item = {"t": event["t"], "text": text or "", "camera": row.get("camera")}
            markers.setdefault(kind, []).append(item)
    out.extend({"style": style, "kind": "marker", "items": items} for style, items in markers.items())
    producers = producers or {}
    marked = None if heuristic is None else set(heuristic)
    for track in out:
        style = TOOL_CALL_STYLE if track["style"] in ("speech", "tool") else track["style"]
        producer = producers.get(style)
        track["producer"] = producer
        track["heuristic"] = is_heuristic(producer) if marked is None else style in marked
    return out


def _answer(content: Any) -> Any:
    if not isinstance(content, str):
        return content
    try:
        return json.loads(content)
    except ValueError:
        return content


def _shapes(answer: Any) -> list[dict[str, Any]]:
    """Boxes and points of a stored VQA answer (pixels of the original frame)."""
    if not isinstance(answer, Mapping):
        return []
    shapes: list[dict[str, Any]] = []
    point = answer.get("point")
    if isinstance(point, list) and len(point) == 2:
        shapes.append({"type": "point", "point": point, "label": str(answer.get("label", ""))})
    for d in answer.get("detections") or []:
        box = d.get("bbox") if isinstance(d, Mapping) else None
        if isinstance(box, list) and len(box) == 4:
            shapes.append({"type": "box", "bbox": box, "label": str(d.get("label", ""))})
    return shapes


def vqa_overlays(events: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Each VQA exchange at its frame and camera: question, parsed answer, and shapes to draw."""
    out: list[dict[str, Any]] = []
    for event in events:
        pairs: dict[str, dict[str, Any]] = {}
        for row in event["rows"]:
            if row.get("style") != "vqa":
                continue
            item = pairs.setdefault(str(row.get("camera")), {"t": event["t"], "frame": event["frame"]})
            item["camera"] = row.get("camera")
            if row.get("role") == "user":
                item["question"] = row.get("content") or ""
            else:
                item["answer"] = _answer(row.get("content"))
                item["shapes"] = _shapes(item["answer"])
        out.extend(pairs.values())
    return out
