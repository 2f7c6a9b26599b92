"""Where an annotation run reads and writes: in place, or a copy in --output_dir."""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from pathlib import Path

from steerable.annotate.config import AnnotateConfig
from steerable.dataset import LeRobotDataset, open_dataset
from steerable.dataset.atomic import fsync_dir
from steerable.errors import ConfigError

__all__ = ["WORK_DIR_NAME", "open_workspace"]

log = logging.getLogger(__name__)

WORK_DIR_NAME = ".steerable"  # staging, summaries; LeRobot ignores it, the Hub upload skips it


def open_workspace(cfg: AnnotateConfig) -> tuple[LeRobotDataset, LeRobotDataset]:
    """(source, target): the dataset to read and the one to write (the same object when in place)."""
    source = open_dataset(str(cfg.root) if cfg.root else str(cfg.repo_id), revision=cfg.revision)
    if cfg.output_dir is None:
        return source, source
    out = Path(cfg.output_dir).expanduser().resolve()
    if out.exists() and any(out.iterdir()):
        if not (out / "meta" / "info.json").is_file():
            raise ConfigError(f"--output_dir {out} exists and is not a dataset; pick an empty or new folder")
        log.info("resuming into existing output %s", out)
    else:
        _link_copy(source.root, out)
    return source, LeRobotDataset(out)


def _link_copy(src: Path, dst: Path) -> None:
    """Copy a dataset, hard-linking the videos.

    Annotation never rewrites videos, and every writer of ours replaces files by rename rather than
    editing them, so linked videos cannot change the source. Metadata and parquet are real copies,
    in case another tool later edits the output in place.
    """
    dst.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{dst.name}.", dir=dst.parent))
    try:
        for path in sorted(src.rglob("*")):
            rel = path.relative_to(src)
            if rel.parts and rel.parts[0] == WORK_DIR_NAME:
                continue
            target = staging / rel
            if path.is_dir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            if rel.parts[0] == "videos":
                try:
                    os.link(path, target)
                    continue
                except OSError:
                    pass
            shutil.copy2(path, target)
        if dst.exists():
            dst.rmdir()
        os.replace(staging, dst)
        fsync_dir(dst.parent)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
