"""Upload an annotated dataset to the Hub and point its codebase-version tag at the new commit.

LeRobot loads a dataset at the tag named after its codebase version (v3.0); without moving the tag
it would keep loading the old, unannotated commit. Untested against the live Hub (see docs/annotate.md).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from steerable.annotate.config import AnnotateConfig
from steerable.annotate.workspace import WORK_DIR_NAME
from steerable.dataset import LeRobotDataset
from steerable.dataset.summary import summarize
from steerable.errors import HubError

__all__ = ["dataset_card", "push_dataset"]

log = logging.getLogger(__name__)

DEFAULT_COMMIT_MESSAGE = "Add language annotations (steerable annotate)"


def dataset_card(ds: LeRobotDataset) -> str:
    """A README.md for the Hub: LeRobot tags plus what the language columns hold."""
    s = summarize(ds)
    lang = s["language"] or {"persistent": {}, "events": {}, "tools": []}
    rows = "\n".join(
        f"| {column} | {style} | {count} |"
        for column in ("persistent", "events")
        for style, count in lang[column].items()
    )
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

# {ds.root.name}

A LeRobot {s['codebase_version']} dataset ({s['total_episodes']} episodes, {s['total_frames']} frames at
{s['fps']} fps, robot: {s['robot_type'] or 'unknown'}) with language annotations written by
[steerable](https://pypi.org/project/steerable/) into the `language_persistent` and `language_events`
columns.

| column | style | rows |
|---|---|---|
{rows}

Tools declared in `meta/info.json`: {', '.join(str(t) for t in lang['tools']) or 'none'}.
"""


def push_dataset(root: Path, cfg: AnnotateConfig, api: Any | None = None) -> dict[str, Any]:
    """Upload `root` (staging excluded), regenerate the card, move the version tag to the commit."""
    from huggingface_hub import HfApi
    from huggingface_hub.errors import HfHubHTTPError

    repo_id = cfg.new_repo_id or cfg.repo_id
    if repo_id is None:  # config validation already refuses this
        raise HubError("--push_to_hub needs --repo_id or --new_repo_id")
    api = api or HfApi()
    ds = LeRobotDataset(root)
    tag = ds.info.codebase_version
    try:
        api.create_repo(repo_id, repo_type="dataset", private=cfg.push_private, exist_ok=True)
        (root / "README.md").write_text(dataset_card(ds), encoding="utf-8")
        commit = api.upload_folder(
            repo_id=repo_id,
            folder_path=str(root),
            repo_type="dataset",
            commit_message=cfg.push_commit_message or DEFAULT_COMMIT_MESSAGE,
            ignore_patterns=[f"{WORK_DIR_NAME}/**", "**/.*.tmp"],
        )
    except (HfHubHTTPError, OSError) as exc:
        raise HubError(f"uploading to {repo_id!r} failed: {exc}; nothing was tagged") from exc
    revision = getattr(commit, "oid", None) or str(commit)
    try:
        api.delete_tag(repo_id, tag=tag, repo_type="dataset")
    except HfHubHTTPError:
        log.debug("no previous %s tag on %s", tag, repo_id)
    try:
        api.create_tag(repo_id, tag=tag, revision=revision, repo_type="dataset")
    except HfHubHTTPError as exc:
        raise HubError(
            f"uploaded {repo_id} at {revision} but could not move tag {tag!r} ({exc}); LeRobot cannot load "
            f"the new data until you run: hf repos tag create {repo_id} {tag} --repo-type dataset "
            f"--revision {revision}"
        ) from exc
    log.info("pushed %s at %s and tagged it %s", repo_id, revision, tag)
    return {"repo_id": repo_id, "revision": revision, "tag": tag}
