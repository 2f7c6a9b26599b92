"""A `view --edit` save the disk refuses: the page gets the reason as JSON, the terminal a warning, and the
dataset stays as it was."""

from __future__ import annotations

import errno
import http.client
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from steerable.dataset import LeRobotDataset
from steerable.dataset.commit import FolderCommit
from steerable.viewer import ViewerData, make_server
from test_viewer_edit import all_files, copy_dataset, episode_body


@pytest.fixture
def editor(viewer_ds: Path, tmp_path: Path) -> Iterator[Any]:
    server = make_server(ViewerData(LeRobotDataset(copy_dataset(viewer_ds, tmp_path / "ds"))), "127.0.0.1", 0,
                         edit=True)
    server.start()
    yield server
    server.shutdown()
    server.server_close()


def post(server: Any, path: str, body: Any) -> tuple[int, dict[str, Any]]:
    conn = http.client.HTTPConnection(*server.server_address, timeout=30)
    conn.request("POST", path, body=json.dumps(body).encode(),
                 headers={"Content-Type": "application/json", "X-Steerable-Token": server.edit.token})
    reply = conn.getresponse()
    data = json.loads(reply.read())  # JSON, not a bare "500 Internal Server Error"
    conn.close()
    return reply.status, data


def full_disk(*args: Any, **kwargs: Any) -> None:
    raise OSError(errno.ENOSPC, "No space left on device")


@pytest.mark.parametrize("where", ["commit", "shard"])
def test_a_full_disk_is_told_to_the_page_and_the_terminal(
    editor: Any, where: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    root = editor.root
    body = episode_body(LeRobotDataset(root), 1)
    body["persistent"][1]["content"] = "a correction"
    before = all_files(root)
    if where == "commit":  # the folder commit's own writes: a WriteError
        monkeypatch.setattr(FolderCommit, "_sync", full_disk)
    else:  # a shard being written (pyarrow raises a plain OSError)
        monkeypatch.setattr("steerable.dataset.writer._rewrite", full_disk)
    with caplog.at_level(logging.WARNING, logger="steerable.viewer.edit"):
        status, reply = post(editor, "/api/episodes/1/language", body)
    assert status == 507
    assert reply["error"].startswith(f"episode 1: could not write {root}: no space left on the device")
    assert reply["error"].endswith("; nothing was saved")
    assert [r.getMessage() for r in caplog.records] == [f"steerable view --edit: {reply['error']}"]
    assert all_files(root) == before
    assert sorted(p.name for p in root.parent.iterdir()) == ["ds"], "no half-built version left beside it"


def test_a_read_only_disk_when_going_back(editor: Any, monkeypatch: pytest.MonkeyPatch,
                                          caplog: pytest.LogCaptureFixture) -> None:
    root = editor.root
    body = episode_body(LeRobotDataset(root), 0)
    body["persistent"][0]["content"] = "a correction"
    assert post(editor, "/api/episodes/0/language", body)[0] == 200
    before = all_files(root)

    def read_only(*args: Any, **kwargs: Any) -> None:
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(FolderCommit, "_sync", read_only)
    with caplog.at_level(logging.WARNING, logger="steerable.viewer.edit"):
        status, reply = post(editor, "/api/revisions/0/restore", {})
    assert status == 503 and "the file system is read-only" in reply["error"]
    assert reply["error"].startswith("going back to revision 0: ") and "nothing was saved" in reply["error"]
    assert "read-only" in caplog.text
    assert all_files(root) == before
