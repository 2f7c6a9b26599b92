"""The one gateway to the Hugging Face Hub: download, upload, tag, card; its failures as HubError.

Datasets: download a working copy at the version tag; push an annotated dataset with a regenerated
card and move its codebase-version tag to the new commit (LeRobot loads a dataset at the tag named
after its codebase version, so without moving it LeRobot would keep loading the old commit).
Policies (`steerable.policy.hub`) upload a checkpoint folder with their model card through
`upload_folder`. Pushes are untested against the live Hub (see docs/annotate.md).
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from steerable.dataset.layout import CODEBASE_VERSION, PROVENANCE_PATH, WORK_DIR_NAME
from steerable.errors import HubError

__all__ = [
    "DEFAULT_COMMIT_MESSAGE",
    "Uploaded",
    "dataset_card",
    "default_work_dir",
    "download_dataset",
    "hub_error",
    "looks_like_repo_id",
    "move_tag",
    "push_dataset",
    "upload_folder",
]

log = logging.getLogger(__name__)

DEFAULT_COMMIT_MESSAGE = "Add language annotations (steerable annotate)"

_REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")

RepoType = Literal["dataset", "model"]


@dataclass(frozen=True)
class Uploaded:
    """The commit an upload made: its id (`revision`) and its page on the Hub."""

    repo_id: str
    revision: str
    url: str


def hub_error(exc: Exception, what: str, doing: str, *, offline: str = "connect and run again") -> HubError:
    """A Hub client failure as one line that says what to do.

    `what` names the repository ("dataset 'me/ds'"), `doing` the operation that failed ("cannot
    download 'me/ds'"), `offline` what to do when the Hub cannot be reached.
    """
    from huggingface_hub.errors import GatedRepoError, LocalEntryNotFoundError, RepositoryNotFoundError

    if isinstance(exc, GatedRepoError):
        return HubError(f"{what} is gated: accept its terms on the Hub and log in (`hf auth login`)")
    if isinstance(exc, RepositoryNotFoundError):
        return HubError(f"{what} was not found on the Hub (check the name, or log in if it is private)")
    if isinstance(exc, LocalEntryNotFoundError):
        return HubError(f"{doing}: the Hub is unreachable (offline?); {offline}")
    status = getattr(getattr(exc, "response", None), "status_code", None)
    if status in (401, 403):
        return HubError(f"{doing}: {exc}; log in with a token that has access (`hf auth login`)")
    return HubError(f"{doing}: {exc}")


def looks_like_repo_id(source: str) -> bool:
    """Whether a dataset word names a Hub repo (USER/NAME, and no such path here) rather than a local folder: the
    one rule of `open_dataset` and of `annotate DATASET`."""
    return bool(_REPO_ID.match(source)) and not Path(source).exists()


def default_work_dir() -> Path:
    """Where downloaded datasets are kept as editable working copies (not the shared HF cache)."""
    base = os.environ.get("STEERABLE_HOME") or Path.home() / ".local" / "share" / "steerable"
    return Path(base) / "datasets"


def download_dataset(repo_id: str, *, revision: str | None = None, work_dir: Path | None = None) -> Path:
    """Download `repo_id` into `<work_dir>/<repo_id>` as real files and return that root.

    Without `revision` the codebase-version tag (v3.0) is used, falling back to `main` when the
    repository has no such tag. Files are materialised in a local folder so annotating them never
    edits the blobs of the shared Hugging Face cache.
    """
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HfHubHTTPError, RevisionNotFoundError

    target = (work_dir or default_work_dir()) / repo_id
    candidates = [revision] if revision else [CODEBASE_VERSION, "main"]
    for rev in candidates:
        try:
            snapshot_download(repo_id, repo_type="dataset", revision=rev, local_dir=target)
            log.info("downloaded %s@%s into %s", repo_id, rev, target)
            return target
        except RevisionNotFoundError:
            if rev == candidates[-1]:
                raise HubError(f"dataset {repo_id!r} has no revision {rev!r} on the Hub") from None
            log.warning("%s has no %s tag; using main", repo_id, rev)
        except (HfHubHTTPError, OSError) as exc:
            offline = "pass a local dataset folder instead"
            raise hub_error(exc, f"dataset {repo_id!r}", f"cannot download {repo_id!r}", offline=offline) from exc
    raise AssertionError("unreachable")


def dataset_card(root: Path) -> str:
    """A README.md for the Hub: LeRobot tags plus what the language columns hold."""
    from steerable.dataset.lerobot import LeRobotDataset
    from steerable.dataset.summary import summarize

    s = summarize(LeRobotDataset(root))
    lang = s.language
    columns = (("persistent", lang.persistent), ("events", lang.events)) if lang else ()
    rows = "\n".join(f"| {column} | {style} | {n} |" for column, counts in columns for style, n in counts.items())
    producers = "\n".join(f"| {style} | {_with_human(who, s.human.get(style))} |"
                          for style, who in sorted(s.producers.items()))
    producers += "".join(f"\n| {style} | {_with_human('', eps)} |" for style, eps in sorted(s.human.items())
                         if style not in s.producers)
    provenance = (
        f"\nWho wrote each style (`{PROVENANCE_PATH}`):\n\n| style | producer |\n|---|---|\n{producers}\n"
        if producers
        else ""
    )
    tools = ", ".join(lang.tools) if lang else ""
    return f"""---
license: other
task_categories:
- robotics
tags:
- LeRobot
- steerable
- language-annotations
configs:
- config_name: default
  data_files: data/*/*.parquet
---

# {root.name}

A LeRobot {s.codebase_version} dataset ({s.total_episodes} episodes, {s.total_frames} frames at
{s.fps} fps, robot: {s.robot_type or 'unknown'}) with language annotations written by
[steerable](https://pypi.org/project/steerable/) into the `language_persistent` and `language_events`
columns.

| column | style | rows |
|---|---|---|
{rows}
{provenance}
Tools declared in `meta/info.json`: {tools or 'none'}.
"""


def _with_human(who: str, episodes: list[int] | None) -> str:
    """A producer cell, naming the episodes a person corrected (provenance `human`, from `steerable view --edit`)."""
    from steerable.dataset.summary import index_ranges

    if not episodes:
        return who
    edited = f"human (episodes {index_ranges(episodes)})"
    return f"{who}; {edited}" if who else edited


def upload_folder(
    folder: Path,
    repo_id: str,
    *,
    repo_type: RepoType,
    card: str,
    commit_message: str,
    ignore_patterns: Sequence[str] = (),
    private: bool = False,
    api: Any | None = None,
) -> Uploaded:
    """Create `repo_id` if needed, write `card` as the folder's README.md, upload the folder as one commit."""
    from huggingface_hub import HfApi
    from huggingface_hub.errors import HfHubHTTPError

    from steerable.dataset.atomic import atomic_write_bytes

    api = api or HfApi()
    try:
        api.create_repo(repo_id, repo_type=repo_type, private=private, exist_ok=True)
        # Replaced, never written in place: the file may be a hard link shared with another version.
        atomic_write_bytes(folder / "README.md", card.encode("utf-8"))
        commit = api.upload_folder(
            repo_id=repo_id,
            folder_path=str(folder),
            repo_type=repo_type,
            commit_message=commit_message,
            ignore_patterns=list(ignore_patterns),
        )
    except (HfHubHTTPError, OSError) as exc:
        raise hub_error(exc, f"{repo_type} repository {repo_id!r}", f"uploading to {repo_id!r} failed") from exc
    revision = getattr(commit, "oid", None) or str(commit)
    page = "datasets/" if repo_type == "dataset" else ""
    url = getattr(commit, "commit_url", None) or f"https://huggingface.co/{page}{repo_id}"
    log.info("uploaded %s to %s at %s", folder, repo_id, revision)
    return Uploaded(repo_id, revision, str(url))


def move_tag(repo_id: str, tag: str, revision: str, *, repo_type: RepoType, api: Any | None = None) -> None:
    """Point `tag` at `revision` (deleting the tag first where it exists)."""
    from huggingface_hub import HfApi
    from huggingface_hub.errors import HfHubHTTPError

    api = api or HfApi()
    try:
        api.delete_tag(repo_id, tag=tag, repo_type=repo_type)
    except HfHubHTTPError:
        log.debug("no previous %s tag on %s", tag, repo_id)
    try:
        api.create_tag(repo_id, tag=tag, revision=revision, repo_type=repo_type)
    except HfHubHTTPError as exc:
        raise HubError(
            f"uploaded {repo_id} at {revision} but could not move tag {tag!r} ({exc}); LeRobot cannot load "
            f"the new data until you run: hf repos tag create {repo_id} {tag} --repo-type {repo_type} "
            f"--revision {revision}"
        ) from exc


def push_dataset(
    root: Path,
    repo_id: str,
    *,
    private: bool = False,
    commit_message: str | None = None,
    api: Any | None = None,
) -> dict[str, str]:
    """Upload `root` (our working folder excluded), regenerate the card, move the version tag."""
    from huggingface_hub import HfApi

    from steerable.dataset.info import load_info

    api = api or HfApi()
    tag = load_info(root).codebase_version
    uploaded = upload_folder(
        root,
        repo_id,
        repo_type="dataset",
        card=dataset_card(root),
        commit_message=commit_message or DEFAULT_COMMIT_MESSAGE,
        ignore_patterns=[f"{WORK_DIR_NAME}/**", "**/.*.tmp"],
        private=private,
        api=api,
    )
    move_tag(repo_id, tag, uploaded.revision, repo_type="dataset", api=api)
    log.info("pushed %s at %s and tagged it %s", repo_id, uploaded.revision, tag)
    return {"repo_id": repo_id, "revision": uploaded.revision, "tag": tag}
