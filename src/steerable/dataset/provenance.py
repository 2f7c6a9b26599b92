"""Who wrote each language style: the `steerable` block of `meta/info.json`, mirrored in a file.

LeRobot drops keys its `DatasetInfo` does not know whenever it rewrites info.json (every
`lerobot-edit-dataset` operation does), so the block is also kept in `meta/steerable_provenance.json`,
which LeRobot leaves alone where it keeps the dataset folder (modify_tasks, reencode_videos).
info.json wins when both hold one; a dataset LeRobot wrote anew (delete_episodes, split, merge,
remove_feature) has neither, and `steerable restore` copies it back from the source dataset.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from steerable.dataset.atomic import atomic_write_bytes
from steerable.dataset.info import DatasetInfo
from steerable.dataset.layout import PROVENANCE_KEY, PROVENANCE_PATH

__all__ = ["info_block", "provenance_block", "read_provenance_file", "recorded_producers", "write_provenance_file"]


def provenance_block(root: Path, info: DatasetInfo) -> dict[str, Any] | None:
    """The provenance block of the dataset at `root`: info.json's, else the file's; None when neither."""
    return info_block(info.model_extra or {}, root)


def info_block(info: Mapping[str, Any], root: Path) -> dict[str, Any] | None:
    """The block of info.json's content `info` (a mapping as read from the file), else the file copy's
    at `root` (a LeRobot rewrite of info.json dropped it); None when neither holds one."""
    block = info.get(PROVENANCE_KEY)
    return block if isinstance(block, dict) else read_provenance_file(root)


def read_provenance_file(root: Path) -> dict[str, Any] | None:
    """The block of `meta/steerable_provenance.json`; None when it is absent or not a JSON object."""
    try:
        block = json.loads((Path(root) / PROVENANCE_PATH).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return block if isinstance(block, dict) else None


def recorded_producers(root: Path, info: DatasetInfo) -> dict[str, str]:
    """style -> model id or `heuristic:<module>`, sorted by style; empty when nothing is recorded."""
    block = provenance_block(root, info)
    producers = block.get("producers") if block is not None else None
    if not isinstance(producers, dict):
        return {}
    return {str(k): str(v) for k, v in sorted(producers.items())}


def write_provenance_file(path: Path, block: Mapping[str, Any], *, durable: bool = True) -> None:
    """Write the block as the file at `path` (deterministic bytes: same block, same file)."""
    text = json.dumps(dict(block), indent=2, sort_keys=True) + "\n"
    atomic_write_bytes(Path(path), text.encode("utf-8"), durable=durable)
