"""Where an annotation run reads and writes: in place, or a new dataset in --output_dir.

Both end in one folder commit (`steerable.dataset.commit`): in place, the new version of the
dataset replaces the old at once; with --output_dir, the output folder appears only when the run
writes, complete (videos hard-linked to the source, metadata and parquet copied, changed shards
written fresh). Until then the run's work folder (staging, summary) is a hidden sibling of the
output, so a killed run resumes and a failed one leaves no output folder behind.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from steerable.annotate.config import AnnotateConfig
from steerable.dataset import LeRobotDataset, open_dataset
from steerable.dataset.atomic import check_writable
from steerable.dataset.layout import WORK_DIR_NAME
from steerable.errors import ConfigError

if TYPE_CHECKING:
    from steerable.dataset.writer import EpisodeLanguage, WriteReport

__all__ = ["WORK_DIR_NAME", "Workspace", "open_workspace"]

log = logging.getLogger(__name__)


@dataclass
class Workspace:
    """`source`: the input dataset; `target`: the dataset the run reads episodes from; `out`: the
    root it writes (absent until the first write when `pending`)."""

    source: LeRobotDataset
    target: LeRobotDataset
    out: Path
    pending: bool = False

    @property
    def work_dir(self) -> Path:
        """The run's `.steerable` folder: inside `out`, or its hidden sibling while `out` is pending."""
        return _pending_work_dir(self.out) if self.pending else self.out / WORK_DIR_NAME

    def write(
        self,
        updates: Mapping[int, EpisodeLanguage],
        *,
        producers: Mapping[str, str] | None = None,
        episode_producers: Mapping[int, Mapping[str, str]] | None = None,
    ) -> WriteReport:
        """Commit the language `updates`: in place, or as the new dataset `out` with the work folder.

        `producers` (style -> model id or heuristic) and `episode_producers` (episode -> style -> the
        same, for that episode's rows) are recorded in meta/steerable_provenance.json.
        """
        from steerable.dataset.commit import commit_folder
        from steerable.dataset.writer import write_language

        if not self.pending:
            return write_language(self.target, updates, producers=producers, episode_producers=episode_producers)
        work = self.work_dir
        # Videos are linked (nobody edits an mp4 in place); parquet and metadata are real copies, so
        # a tool that later edits the output in place cannot reach the source through a shared inode.
        with commit_folder(
            self.out, base=self.source.root, share=lambda rel: rel.startswith("videos/"), exclude=(WORK_DIR_NAME,)
        ) as tx:
            if work.is_dir():
                tx.add_tree(work, WORK_DIR_NAME)
            report = write_language(
                self.source, updates, into=tx, producers=producers, episode_producers=episode_producers
            )
        self.pending = False
        self.target = LeRobotDataset(self.out)
        shutil.rmtree(work, ignore_errors=True)
        return report


def _pending_work_dir(out: Path) -> Path:
    return out.parent / f".{out.name}.steerable-work"


def open_workspace(cfg: AnnotateConfig) -> Workspace:
    """Open the input dataset and decide where the run writes; creates nothing on disk."""
    source = open_dataset(str(cfg.root) if cfg.root else str(cfg.repo_id), revision=cfg.revision)
    if cfg.output_dir is None or Path(cfg.output_dir).expanduser().resolve() == source.root:
        # In place: the staging goes inside the dataset, its new version beside it.
        check_writable(source.root, hint="annotate into a copy with --output_dir")
        check_writable(source.root, inside=True, hint="annotate into a copy with --output_dir")
        if os.path.ismount(source.root):
            raise ConfigError(
                f"{source.root} is a mount point, which a new version cannot replace by rename; "
                "annotate into a copy with --output_dir"
            )
        return Workspace(source, source, source.root)
    out = Path(cfg.output_dir).expanduser().resolve()
    if out.is_relative_to(source.root):
        raise ConfigError(
            f"--output_dir {out} is inside the dataset {source.root}, which the copy would then contain; "
            "choose a folder outside it"
        )
    check_writable(out, hint="choose another --output_dir")
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--output_dir {out} is a file; pass a folder path")
    if out.is_dir() and any(out.iterdir()):
        if not (out / "meta" / "info.json").is_file():
            raise ConfigError(f"--output_dir {out} exists and is not a dataset; pick an empty or new folder")
        log.info("resuming into existing output %s", out)
        shutil.rmtree(_pending_work_dir(out), ignore_errors=True)  # carried in by the commit that made `out`
        return Workspace(source, LeRobotDataset(out), out)
    if _pending_work_dir(out).is_dir():
        log.info("resuming the run that is to create %s", out)
    return Workspace(source, source, out, pending=True)
