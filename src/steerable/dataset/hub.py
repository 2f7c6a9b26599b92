"""The gateway to the Hugging Face Hub for datasets: download a working copy at the version tag."""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path

from steerable.dataset.layout import CODEBASE_VERSION
from steerable.errors import HubError

__all__ = ["default_work_dir", "download_dataset", "looks_like_repo_id"]

log = logging.getLogger(__name__)

_REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


def looks_like_repo_id(source: str) -> bool:
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
    from huggingface_hub.errors import (
        GatedRepoError,
        HfHubHTTPError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

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
        except GatedRepoError as exc:
            raise HubError(
                f"dataset {repo_id!r} is gated: accept its terms on the Hub and log in (`hf auth login`)"
            ) from exc
        except RepositoryNotFoundError as exc:
            raise HubError(
                f"dataset {repo_id!r} was not found on the Hub (check the name, or log in if it is private)"
            ) from exc
        except LocalEntryNotFoundError as exc:
            raise HubError(
                f"cannot download {repo_id!r}: the Hub is unreachable (offline?); "
                "pass a local dataset folder instead"
            ) from exc
        except (HfHubHTTPError, OSError) as exc:
            raise HubError(f"cannot download {repo_id!r} from the Hub: {exc}") from exc
    raise AssertionError("unreachable")
