"""`--push_to_hub`: upload without staging, a regenerated card, the version tag moved to the commit.

The Hub is replaced by a recording fake of `huggingface_hub.HfApi` (no network here); the calls and their
arguments are what the real client would send. Untested against the live Hub.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from huggingface_hub.errors import HfHubHTTPError

from annotate_helpers import make_synthetic
from steerable.annotate.config import AnnotateConfig
from steerable.annotate.run import annotate
from steerable.dataset.hub import push_dataset
from steerable.errors import HubError
from steerable.policy.hub import push_checkpoint


def _http_error(status: int, message: str) -> HfHubHTTPError:
    import httpx2

    response = httpx2.Response(status, request=httpx2.Request("POST", "https://hub.invalid/api"))
    return HfHubHTTPError(message, response=response)


class FakeHub:
    def __init__(self, *, fail_tag: bool = False, fail_upload: int | None = None) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.fail_tag = fail_tag
        self.fail_upload = fail_upload
        self.uploaded: list[str] = []

    def create_repo(self, repo_id: str, **kw: Any) -> None:
        self.calls.append(("create_repo", {"repo_id": repo_id, **kw}))

    def upload_folder(self, **kw: Any) -> Any:
        self.calls.append(("upload_folder", kw))
        if self.fail_upload:
            raise _http_error(self.fail_upload, f"{self.fail_upload} Client Error: Unauthorized")
        root = Path(kw["folder_path"])
        ignored = kw["ignore_patterns"]
        self.uploaded = sorted(
            str(p.relative_to(root)) for p in root.rglob("*")
            if p.is_file() and not any(p.relative_to(root).match(pat) for pat in ignored)
            and ".steerable" not in p.relative_to(root).parts
        )
        return SimpleNamespace(oid="abc123")

    def delete_tag(self, repo_id: str, **kw: Any) -> None:
        self.calls.append(("delete_tag", {"repo_id": repo_id, **kw}))

    def create_tag(self, repo_id: str, **kw: Any) -> None:
        self.calls.append(("create_tag", {"repo_id": repo_id, **kw}))
        if self.fail_tag:
            raise _http_error(403, "403 Forbidden")


@pytest.fixture
def annotated(tmp_path: Path) -> Path:
    root = make_synthetic(tmp_path / "ds", episodes=2)
    annotate(AnnotateConfig(root=root, executor={"progress": False}))
    return root


def test_push_uploads_without_staging_and_moves_the_tag(annotated: Path) -> None:
    hub = FakeHub()
    out = push_dataset(annotated, "me/ds", private=True, api=hub)
    assert out == {"repo_id": "me/ds", "revision": "abc123", "tag": "v3.0"}
    names = [name for name, _ in hub.calls]
    assert names == ["create_repo", "upload_folder", "delete_tag", "create_tag"]
    assert hub.calls[0][1]["private"] is True and hub.calls[0][1]["repo_type"] == "dataset"
    upload = hub.calls[1][1]
    assert upload["repo_type"] == "dataset" and ".steerable/**" in upload["ignore_patterns"]
    assert hub.calls[3][1] == {"repo_id": "me/ds", "tag": "v3.0", "revision": "abc123", "repo_type": "dataset"}
    assert "README.md" in hub.uploaded and "meta/info.json" in hub.uploaded
    assert not any(".steerable" in p for p in hub.uploaded)
    card = (annotated / "README.md").read_text()
    assert "language_persistent" in card and "| persistent | subtask |" in card


def test_new_repo_id_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hub = FakeHub()
    monkeypatch.setattr("huggingface_hub.HfApi", lambda: hub)
    root = make_synthetic(tmp_path / "ds", episodes=1)
    cfg = AnnotateConfig(
        root=root, repo_id="me/ds", new_repo_id="me/ds-annotated", push_to_hub=True, executor={"progress": False}
    )
    assert (annotate(cfg).push or {})["repo_id"] == "me/ds-annotated"


def test_tag_failure_prints_the_command_that_fixes_it(annotated: Path) -> None:
    hub = FakeHub(fail_tag=True)
    with pytest.raises(HubError, match=r"hf repos tag create me/ds v3.0 --repo-type dataset --revision abc123"):
        push_dataset(annotated, "me/ds", api=hub)


def test_run_with_push_reports_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hub = FakeHub()
    monkeypatch.setattr("huggingface_hub.HfApi", lambda: hub)
    root = make_synthetic(tmp_path / "ds", episodes=2)
    summary = annotate(AnnotateConfig(root=root, repo_id="me/ds", push_to_hub=True, executor={"progress": False}))
    assert summary.push is not None and summary.push["revision"] == "abc123"


def test_a_refused_upload_is_one_line_that_says_to_log_in_and_tags_nothing(annotated: Path) -> None:
    hub = FakeHub(fail_upload=401)
    with pytest.raises(HubError, match=r"uploading to 'me/ds' failed: 401 .*log in .*hf auth login"):
        push_dataset(annotated, "me/ds", api=hub)
    assert [name for name, _ in hub.calls] == ["create_repo", "upload_folder"]


def _checkpoint(tmp_path: Path) -> Path:
    folder = tmp_path / "step_00000002"
    folder.mkdir()
    policy = {"backbone": "tiny", "chunk_size": 4, "cameras": ["observation.images.top"],
              "state_key": "observation.state",
              "state_mode": "absolute", "action_key": "action"}
    (folder / "config.json").write_text(json.dumps({"format": 1, "policy": policy}))
    (folder / "optimizer.safetensors").write_bytes(b"training only")
    return folder


def test_a_policy_goes_through_the_same_gateway_as_a_model_repository(tmp_path: Path) -> None:
    hub = FakeHub()
    folder = _checkpoint(tmp_path)
    url = push_checkpoint(folder, "me/policy", private=True, api=hub)
    assert url == "https://huggingface.co/me/policy"  # the commit has no commit_url: the repository page
    assert [name for name, _ in hub.calls] == ["create_repo", "upload_folder"]  # no dataset version tag
    assert hub.calls[0][1] == {"repo_id": "me/policy", "repo_type": "model", "private": True, "exist_ok": True}
    assert hub.calls[1][1]["repo_type"] == "model" and "optimizer.safetensors" in hub.calls[1][1]["ignore_patterns"]
    assert hub.uploaded == ["README.md", "config.json"]
    assert "steerable run" in (folder / "README.md").read_text() and "`tiny`" in (folder / "README.md").read_text()
    with pytest.raises(HubError, match=r"uploading to 'me/policy' failed: 403 .*hf auth login"):
        push_checkpoint(folder, "me/policy", api=FakeHub(fail_upload=403))
