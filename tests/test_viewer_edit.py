"""`steerable view --edit`: the write routes refuse what they must and write nothing then; one writer
per dataset; a SIGKILL of the server in the middle of a save leaves the old or the new dataset."""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import json
import random
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from steerable.dataset import LeRobotDataset
from steerable.dataset.review import episode_rows, restore_revision, save_episode
from viewer_data import start_view, steerable


def copy_dataset(src: Path, dst: Path) -> Path:
    """A private copy of the shared viewer dataset (the traversal test's symlink left out)."""
    shutil.copytree(src, dst, symlinks=True, ignore=shutil.ignore_patterns("outside_link"))
    return dst


def dataset_state(root: Path) -> dict[str, str]:
    """sha256 of every file a save may change: the data shards, meta/info.json and its provenance mirror."""
    files = sorted(root.glob("data/*/*.parquet")) + [root / "meta" / "info.json"]
    files += [p for p in [root / "meta" / "steerable_provenance.json"] if p.is_file()]
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest() for p in files}


def all_files(root: Path) -> dict[str, str]:
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file() and p.name != "annotate.lock":
            out[p.relative_to(root).as_posix()] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


class Edit:
    """A running `steerable view --edit` and how to talk to it."""

    def __init__(self, proc: subprocess.Popen[str], url: str) -> None:
        self.proc, self.url = proc, url
        base, _, fragment = url.partition("#")
        self.token = fragment.split("token=", 1)[1].split("&")[0]
        host, port = base[len("http://"):].rstrip("/").rsplit(":", 1)
        self.address = (host, int(port))

    def post(self, path: str, body: Any = None, *, token: str | None = "", headers: dict[str, str] | None = None,
             raw: bytes | None = None) -> tuple[int, dict[str, Any]]:
        conn = http.client.HTTPConnection(*self.address, timeout=60)
        head = {"Content-Type": "application/json", **(headers or {})}
        if token is not None:
            head["X-Steerable-Token"] = token if token else self.token
        data = raw if raw is not None else json.dumps(body if body is not None else {}).encode()
        conn.request("POST", path, body=data, headers=head)
        reply = conn.getresponse()
        text = reply.read()
        conn.close()
        try:
            return reply.status, json.loads(text)
        except ValueError:
            return reply.status, {"text": text.decode(errors="replace")}

    def get(self, path: str) -> Any:
        conn = http.client.HTTPConnection(*self.address, timeout=60)
        conn.request("GET", path)
        reply = conn.getresponse()
        body = json.loads(reply.read())
        conn.close()
        assert reply.status == 200, body
        return body

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.communicate(timeout=20)


@pytest.fixture
def edit_ds(viewer_ds: Path, tmp_path: Path) -> Path:
    return copy_dataset(viewer_ds, tmp_path / "ds")


@pytest.fixture
def editor(edit_ds: Path) -> Iterator[Edit]:
    proc, url = start_view(str(edit_ds), "--edit")
    session = Edit(proc, url)
    yield session
    session.stop()


def episode_body(ds: LeRobotDataset, episode: int) -> dict[str, Any]:
    rows = episode_rows(ds, episode)
    return {"persistent": rows.persistent, "events": [{"t": t, "row": r} for t, r in rows.events]}


def test_edit_url_carries_a_token_and_binds_loopback(editor: Edit) -> None:
    assert editor.address[0] == "127.0.0.1" and len(editor.token) >= 32
    assert editor.get("/api/dataset")["edit"] is True


def test_refused_writes_write_nothing(editor: Edit, edit_ds: Path) -> None:
    ds = LeRobotDataset(edit_ds)
    before = all_files(edit_ds)
    good = episode_body(ds, 1)
    second = [i for i, r in enumerate(good["persistent"]) if r["style"] == "subtask"][1]
    good["persistent"][second]["content"] = "a correction"
    save = "/api/episodes/1/language"

    status, reply = editor.post(save, good, token=None)
    assert status == 403 and "token" in reply["error"]
    assert editor.post(save, good, token="not-the-token")[0] == 403
    assert editor.post(save, good, headers={"Origin": "http://evil.example"})[0] == 403  # another site's page
    assert editor.post(save, good, headers={"Host": f"evil.example:{editor.address[1]}"})[0] == 403  # DNS rebinding
    assert editor.post(save, good, headers={"Content-Type": "text/plain"})[0] == 415  # a form post cannot do it
    # paths outside the dataset, or any path at all: there is no route that takes one
    assert editor.post("/files/meta/info.json", good)[0] == 405
    assert editor.post("/files/../../../tmp/x", good)[0] in (404, 405)
    assert editor.post("/api/episodes/..%2F..%2Fetc/language", good)[0] == 404
    status, reply = editor.post(save, {**good, "path": "../../etc/passwd"})
    assert status == 422 and "path" in reply["error"]
    assert editor.post("/api/episodes/99/language", good)[0] == 404

    # bodies over the limit: refused from the declared length, or once the streamed body passes it
    with socket.create_connection(editor.address, timeout=30) as s:
        s.sendall(f"POST {save} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                  f"X-Steerable-Token: {editor.token}\r\nContent-Length: {100 * 1024 * 1024}\r\n\r\n".encode())
        s.sendall(b"[" * 65536)
        assert s.recv(4096).startswith(b"HTTP/1.1 413")
    with socket.create_connection(editor.address, timeout=30) as s:
        s.sendall(f"POST {save} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                  f"X-Steerable-Token: {editor.token}\r\nTransfer-Encoding: chunked\r\n\r\n".encode())
        chunk = b" " * (1024 * 1024)
        reply = b""
        s.settimeout(0.5)
        for _ in range(12):  # 12 MiB, past the 8 MiB limit
            s.sendall(b"%x\r\n" % len(chunk) + chunk + b"\r\n")
            try:
                reply = s.recv(4096)
                break
            except TimeoutError:
                continue
        s.settimeout(30)
        reply = reply or s.recv(4096)
        assert reply.startswith(b"HTTP/1.1 413"), reply[:80]

    # invalid rows: every problem named, one message each, nothing written
    bad = json.loads(json.dumps(good))
    bad["persistent"][0]["style"] = "subtsk"  # a typo
    bad["persistent"][1]["timestamp"] = 0.123  # between two frames
    bad["events"][0]["row"]["camera"] = "observation.images.nope"  # a vqa row on a camera the dataset lacks
    status, reply = editor.post(save, bad)
    assert status == 422 and "nothing was saved" in reply["error"]
    problems = reply["problems"]
    assert len(problems) == 3, problems
    assert any("subtsk" in p for p in problems) and any("matches no frame" in p for p in problems)
    assert any("observation.images.nope" in p for p in problems)
    assert all("\n" not in p for p in problems)

    # a stale page (the rows changed since it read them) is refused as well
    assert editor.post(save, {**good, "version": "0123456789abcdef"})[0] == 409

    assert all_files(edit_ds) == before  # nothing of the above wrote anything
    assert not (edit_ds / ".steerable" / "revisions").exists()

    version = editor.get("/api/episodes/1")["version"]
    status, reply = editor.post(save, {**good, "version": version, "ops": {"retype": 1}})
    assert status == 200 and reply["revision"]["id"] == 1 and reply["revision"]["styles"] == {"1": ["subtask"]}
    assert [r["id"] for r in editor.get("/api/revisions")["revisions"]] == [1]
    assert "a correction" in [r["content"] for r in reply["episode"]["persistent"]]


def test_one_writer_at_a_time(editor: Edit, edit_ds: Path) -> None:
    again = steerable("view", str(edit_ds), "--edit", "--port", "0")
    assert again.returncode == 2 and again.stderr.count("\n") == 1, again.stderr
    assert "`steerable view --edit` (pid" in again.stderr and str(edit_ds) in again.stderr
    annotate = steerable("annotate", "--root", str(edit_ds), "--executor.progress", "false")
    assert annotate.returncode == 2 and "`steerable view --edit`" in annotate.stderr, annotate.stderr
    back = steerable("revisions", str(edit_ds), "--restore", "0")
    assert back.returncode == 2 and "`steerable view --edit`" in back.stderr
    editor.stop()
    assert steerable("revisions", str(edit_ds)).returncode == 0  # the lock went with the server


def _loads_everywhere(root: Path) -> None:
    """The dataset as pyarrow and Hugging Face `datasets` read it (no steerable code)."""
    import datasets

    for path in sorted(root.glob("data/*/*.parquet")):
        assert pq.read_table(path).num_rows > 0
    loaded = datasets.load_dataset(
        "parquet", data_files=sorted(str(p) for p in root.glob("data/*/*.parquet")), split="train",
        cache_dir=str(root.parent / "hf-cache"), keep_in_memory=True,
    )
    assert loaded.num_rows == LeRobotDataset(root).total_frames
    assert "language_persistent" in loaded.column_names


def test_sigkill_during_a_save_leaves_the_old_or_the_new_dataset(edit_ds: Path, tmp_path: Path) -> None:
    ds = LeRobotDataset(edit_ds)
    body = episode_body(ds, 1)
    body["persistent"] = [r for r in body["persistent"] if r["style"] != "subtask" or r["timestamp"] == 0.0]
    body["status"] = "reviewed"
    old = dataset_state(edit_ds)
    twin = copy_dataset(edit_ds, tmp_path / "twin")  # the same save, made whole: the new version
    tds = LeRobotDataset(twin)
    save_episode(tds, 1, body["persistent"], [(e["t"], e["row"]) for e in body["events"]], status="reviewed")
    new = dataset_state(twin)
    assert new != old
    proc, url = start_view(str(edit_ds), "--edit")  # one whole save, timed: where the kills should land
    session = Edit(proc, url)
    started = time.perf_counter()
    assert session.post("/api/episodes/1/language", body)[0] == 200
    whole = time.perf_counter() - started
    session.stop()
    assert dataset_state(edit_ds) == new
    restore_revision(LeRobotDataset(edit_ds), 0)
    assert dataset_state(edit_ds) == old
    rng = random.Random(7)
    seen = []
    for attempt in range(6):
        proc, url = start_view(str(edit_ds), "--edit")
        session = Edit(proc, url)
        session.get("/api/dataset")  # up and warm
        thread = threading.Thread(target=_ignore, args=(session.post, "/api/episodes/1/language", body), daemon=True)
        thread.start()
        time.sleep(whole * (attempt / 4) * rng.uniform(0.8, 1.2))
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=20)
        thread.join(30)
        mid = bool([p for p in edit_ds.parent.iterdir() if ".steerable-" in p.name])  # a commit's siblings
        state = dataset_state(edit_ds)  # read before any steerable code could repair anything
        assert state in (old, new), f"attempt {attempt}: a mix of old and new files"
        _loads_everywhere(edit_ds)
        LeRobotDataset(edit_ds)  # an open finishes or undoes what the kill left beside the folder
        assert dataset_state(edit_ds) in (old, new)
        seen.append(("new" if dataset_state(edit_ds) == new else "old") + (" (killed mid-commit)" if mid else ""))
        if dataset_state(edit_ds) == new:  # back to the old version for the next attempt
            restore_revision(LeRobotDataset(edit_ds), 0)
            assert dataset_state(edit_ds) == old
    print(f"a whole save took {whole * 1000:.0f} ms; after each SIGKILL:", seen)
    assert not [p for p in edit_ds.parent.iterdir() if ".steerable-" in p.name]  # no leftovers after an open
    assert any(s.startswith("old") for s in seen) and any(s.startswith("new") for s in seen)


def _ignore(fn: Any, *args: Any) -> None:
    with contextlib.suppress(OSError, http.client.HTTPException):  # the server was killed under the request
        fn(*args)

