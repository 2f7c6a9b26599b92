"""Export rendered samples for fine-tuning a high-level VLM: OpenAI-chat JSONL or a Hugging Face dataset.

The export is built beside `out` and switched in at the end by one folder commit
(`steerable.dataset.commit`), so `out` is either absent, as it was, or complete. Camera frames are decoded
one pass per camera for a chunk of an episode's samples and stored as JPEG, once per (episode, frame, camera).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import tempfile
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from steerable.dataset import LeRobotDataset
from steerable.dataset.commit import commit_folder
from steerable.dataset.provenance import read_provenance
from steerable.errors import ConfigError, MissingExtraError
from steerable.recipes import Recipe
from steerable.recipes.render import RenderOptions
from steerable.train.images import frame_jpegs, image_features, image_name
from steerable.train.samples import DatasetRenderer, Fallback, FrameSample

__all__ = [
    "JSONL_NAME", "ExportFormat", "ExportReport", "HeuristicRows", "export_samples", "hf_features", "openai_messages",
]

logger = logging.getLogger(__name__)

ExportFormat = Literal["jsonl", "hf"]
HeuristicRows = Literal["drop", "keep"]
JSONL_NAME = "samples.jsonl"
IMAGES_DIR = "images"
_CHUNK = 64  # samples decoded together: bounds the raw frames held in memory


@dataclass(frozen=True)
class ExportReport:
    """What an export wrote: samples, distinct JPEG frames, frames the recipe left empty, samples left
    out for having no text target, where; and the episodes whose heuristic rows were left out (episode
    -> styles)."""

    path: Path
    format: ExportFormat
    samples: int
    images: int
    skipped: int
    untargeted: int = 0
    heuristic: dict[int, list[str]] = field(default_factory=dict)


@dataclass
class _Chunk:
    episode_index: int
    samples: list[FrameSample]
    jpegs: dict[tuple[int, str], bytes]


def export_samples(
    source: LeRobotDataset | DatasetRenderer,
    recipe: Recipe | None,
    out: Path | str,
    *,
    format: ExportFormat = "jsonl",
    max_samples: int | None = None,
    episodes: Iterable[int] | None = None,
    fallback: Fallback = "none",
    keep_untargeted: bool | None = None,
    heuristic_rows: HeuristicRows | None = None,
    options: RenderOptions | None = None,
    jpeg_quality: int = 90,
    overwrite: bool = False,
    progress: Callable[[int], None] | None = None,
) -> ExportReport:
    """Render `recipe` over `source` and write the samples to the folder `out`.

    `source` is a dataset (then `recipe` is required) or a ready DatasetRenderer (then `recipe` is
    None). Frames the recipe leaves empty are skipped, and so are samples without a text target
    (only low-level turns, which train actions, not the VLM: a `low_level` execution component, the
    task fallback) unless `keep_untargeted`; by default they are kept only with `fallback="task"`,
    which exists to add them. Rows a heuristic wrote rather than a model or a person (the provenance
    file's per-episode record, `steerable.dataset.provenance`) are left out before rendering unless
    `heuristic_rows="keep"`: they are no fine-tuning targets (a ready DatasetRenderer keeps its own
    `leave_out`). `progress` is called with the number of frames rendered since its last call.

    Raises:
        ConfigError: a bad argument, or `out` is not empty and `overwrite` is False.
        MissingExtraError: `format="hf"` without the `datasets` package.
    """
    renderer = _renderer(source, recipe, fallback, options, heuristic_rows)
    if format not in ("jsonl", "hf"):
        raise ConfigError(f"format must be 'jsonl' or 'hf', got {format!r}")
    if max_samples is not None and max_samples < 1:
        raise ConfigError(f"max_samples must be at least 1, got {max_samples}")
    if not 1 <= jpeg_quality <= 95:
        raise ConfigError(f"jpeg_quality must be in 1..95, got {jpeg_quality}")
    ds = renderer.dataset
    chosen = [ds.episode(e).episode_index for e in episodes] if episodes is not None else None
    if format == "hf":
        _datasets()  # fail before rendering anything
    out = Path(out)
    counts = _Counts()
    keep = fallback == "task" if keep_untargeted is None else keep_untargeted
    chunks = _chunks(renderer, chosen, max_samples, jpeg_quality, keep, counts, progress)
    with _staged(out, overwrite) as tmp:
        if format == "jsonl":
            _write_jsonl(tmp, chunks, ds.tools, counts)
        else:
            _write_hf(tmp, chunks, ds.tools, counts)
    report = ExportReport(out, format, counts.samples, counts.images, counts.skipped, counts.untargeted,
                          dict(sorted(renderer.left_out.items())))
    logger.info("exported %d samples (%d images) to %s", report.samples, report.images, out)
    return report


def _renderer(source: LeRobotDataset | DatasetRenderer, recipe: Recipe | None, fallback: Fallback,
              options: RenderOptions | None, heuristic_rows: HeuristicRows | None) -> DatasetRenderer:
    if heuristic_rows not in (None, "drop", "keep"):
        raise ConfigError(f"heuristic_rows must be 'drop' or 'keep', got {heuristic_rows!r}")
    if isinstance(source, DatasetRenderer):
        if recipe is not None or heuristic_rows is not None:
            raise ConfigError("pass a DatasetRenderer with recipe=None and its own leave_out, or a dataset "
                              "with a recipe")
        return source
    if recipe is None:
        raise ConfigError("exporting a dataset needs a recipe")
    leave_out = None if heuristic_rows == "keep" else read_provenance(source.root, source.info).stand_in_styles
    return DatasetRenderer(source, recipe, options=options, fallback=fallback, leave_out=leave_out)


@dataclass
class _Counts:
    samples: int = 0
    images: int = 0
    skipped: int = 0
    untargeted: int = 0
    heuristic: dict[int, list[str]] = field(default_factory=dict)


def _chunks(renderer: DatasetRenderer, episodes: list[int] | None, max_samples: int | None, quality: int,
            keep_untargeted: bool, counts: _Counts, progress: Callable[[int], None] | None) -> Iterator[_Chunk]:
    """Rendered samples with their JPEG frames, a chunk of one episode at a time, up to max_samples."""
    ds = renderer.dataset
    for ep in episodes if episodes is not None else [e.episode_index for e in ds.episodes]:
        pending: list[FrameSample] = []
        for frame in renderer.episode_samples(ep):
            if progress is not None:
                progress(1)
            if frame.sample is None:
                counts.skipped += 1
                continue
            if not (keep_untargeted or frame.sample.target_message_indices):
                counts.untargeted += 1
                continue
            pending.append(frame)
            counts.samples += 1
            done = max_samples is not None and counts.samples >= max_samples
            if len(pending) == _CHUNK or done:
                yield _chunk(ds, ep, pending, quality)
                pending = []
            if done:
                return
        if pending:
            yield _chunk(ds, ep, pending, quality)


def _chunk(ds: LeRobotDataset, ep: int, samples: list[FrameSample], quality: int) -> _Chunk:
    wanted = [(s.frame_index, s.timestamp, cam) for s in samples for cam in image_features(_messages(s))]
    return _Chunk(ep, samples, frame_jpegs(ds, ep, wanted, quality))


def _messages(s: FrameSample) -> list[dict[str, Any]]:
    assert s.sample is not None  # _chunks keeps rendered samples only
    return s.sample.messages


# -- OpenAI chat format ---------------------------------------------------------------------------


def openai_messages(s: FrameSample, image_url: Callable[[str], str]) -> list[dict[str, Any]]:
    """The sample's messages in OpenAI chat format.

    Image blocks become `image_url` parts (`image_url(camera_key)` gives the URL), tool-call
    arguments JSON strings, and assistant messages carry `weight` 1 when they are targets, else 0.
    """
    sample = s.sample
    if sample is None:
        return []
    out = []
    for i, message in enumerate(sample.messages):
        converted: dict[str, Any] = {"role": message["role"]}
        content = message.get("content")
        if isinstance(content, list):
            converted["content"] = [_openai_part(b, image_url) for b in content]
        elif content is not None:
            converted["content"] = content
        calls = message.get("tool_calls")
        if calls:
            converted["tool_calls"] = [_openai_call(c, f"call_{s.index}_{i}_{k}") for k, c in enumerate(calls)]
        if message["role"] == "assistant":
            converted["weight"] = int(i in sample.target_message_indices)
        out.append(converted)
    return out


def _openai_part(block: Any, image_url: Callable[[str], str]) -> Any:
    if isinstance(block, Mapping) and block.get("type") == "image" and block.get("feature"):
        return {"type": "image_url", "image_url": {"url": image_url(str(block["feature"]))}}
    return dict(block) if isinstance(block, Mapping) else block


def _openai_call(call: Mapping[str, Any], call_id: str) -> dict[str, Any]:
    function = dict(call.get("function") or {})
    arguments = function.get("arguments")
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments if arguments is not None else {}, ensure_ascii=False)
    return {"id": call_id, "type": "function", "function": {"name": function.get("name"), "arguments": arguments}}


def _metadata(s: FrameSample) -> dict[str, Any]:
    assert s.sample is not None
    return {
        "index": s.index,
        "episode_index": s.episode_index,
        "frame_index": s.frame_index,
        "component": s.sample.component,
        "target_message_indices": s.sample.target_message_indices,
        "message_streams": s.sample.message_streams,
    }


def _has_tool_calls(s: FrameSample) -> bool:
    return any(m.get("tool_calls") for m in _messages(s))


def _relative_url(s: FrameSample) -> Callable[[str], str]:
    return lambda camera: f"{IMAGES_DIR}/{image_name(s.episode_index, s.frame_index, camera)}"


def _write_jsonl(tmp: Path, chunks: Iterator[_Chunk], tools: list[dict[str, Any]], counts: _Counts) -> None:
    images = tmp / IMAGES_DIR
    images.mkdir()
    with open(tmp / JSONL_NAME, "w", encoding="utf-8") as fh:
        for chunk in chunks:
            # Frames are unique across chunks, so each file is written once.
            for (frame_index, camera), data in chunk.jpegs.items():
                (images / image_name(chunk.episode_index, frame_index, camera)).write_bytes(data)
                counts.images += 1
            for s in chunk.samples:
                record: dict[str, Any] = {"messages": openai_messages(s, _relative_url(s))}
                if _has_tool_calls(s):
                    record["tools"] = tools
                record["metadata"] = _metadata(s)
                fh.write(json.dumps(record, ensure_ascii=False) + "\n")
        fh.flush()
        os.fsync(fh.fileno())


# -- Hugging Face datasets ------------------------------------------------------------------------


def _datasets() -> Any:
    try:
        import datasets
    except ImportError as exc:
        raise MissingExtraError("datasets", "train") from exc
    return datasets


def hf_features() -> Any:
    """The `datasets.Features` of an `hf` export (see docs/export.md)."""
    d = _datasets()
    string, int64 = d.Value("string"), d.Value("int64")
    call = {"id": string, "type": string, "function": {"name": string, "arguments": string}}
    message = {"role": string, "content": d.List({"type": string, "text": string}), "tool_calls": d.List(call)}
    return d.Features({
        "messages": d.List(message),
        "images": d.List(d.Image()),
        "tools": string,
        "index": int64,
        "episode_index": int64,
        "frame_index": int64,
        "component": string,
        "message_streams": d.List(string),
        "target_message_indices": d.List(int64),
    })


def _hf_row(s: FrameSample, jpegs: Mapping[tuple[int, str], bytes], tools: str) -> dict[str, Any]:
    """One row: content as text/image blocks, images in placeholder order, tool arguments as JSON."""
    messages, images = [], []
    for i, message in enumerate(_messages(s)):
        content = message.get("content")
        blocks: list[dict[str, Any]] = []
        for block in [{"type": "text", "text": content}] if isinstance(content, str) else content or ():
            if block.get("type") == "image":
                camera = str(block.get("feature"))
                blocks.append({"type": "image", "text": None})
                images.append({"bytes": jpegs[(s.frame_index, camera)],
                               "path": image_name(s.episode_index, s.frame_index, camera)})
            elif block.get("type") == "text":
                blocks.append({"type": "text", "text": str(block.get("text") or "")})
        calls = [_openai_call(c, f"call_{s.index}_{i}_{k}") for k, c in enumerate(message.get("tool_calls") or ())]
        messages.append({"role": message["role"], "content": blocks, "tool_calls": calls})
    return {"messages": messages, "images": images, "tools": tools if _has_tool_calls(s) else None,
            **_metadata(s)}


def _write_hf(tmp: Path, chunks: Iterator[_Chunk], tools: list[dict[str, Any]], counts: _Counts) -> None:
    d = _datasets()
    catalog = json.dumps(tools, ensure_ascii=False)
    written: set[tuple[int, int, str]] = set()

    def rows() -> Iterator[dict[str, Any]]:
        for chunk in chunks:
            written.update((chunk.episode_index, f, cam) for f, cam in chunk.jpegs)
            for s in chunk.samples:
                yield _hf_row(s, chunk.jpegs, catalog)

    quiet = not d.is_progress_bar_enabled()
    d.disable_progress_bars()  # the caller shows its own progress
    try:
        with tempfile.TemporaryDirectory(prefix=".hf-cache-", dir=tmp.parent) as cache:
            # An explicit fingerprint: `datasets` would otherwise try to hash (pickle) the generator.
            dataset = d.Dataset.from_generator(rows, features=hf_features(), cache_dir=cache,
                                               fingerprint=uuid.uuid4().hex)
            dataset.save_to_disk(str(tmp))
    finally:
        if not quiet:
            d.enable_progress_bars()
    counts.images = len(written)


# -- the output folder -------------------------------------------------------------------------------


@contextlib.contextmanager
def _staged(out: Path, overwrite: bool) -> Iterator[Path]:
    """The folder to write the export in; it replaces `out` all at once on success (a folder commit)."""
    if out.exists() and not out.is_dir():
        raise ConfigError(f"{out} is a file; the export needs a folder")
    if out.is_dir() and any(out.iterdir()) and not overwrite:
        raise ConfigError(f"{out} is not empty; choose a new folder, or replace it with --overwrite")
    with commit_folder(out) as tx:
        yield tx.root
