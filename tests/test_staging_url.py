"""Staging on an fsspec URL: `file://` and in-process `memory://` round trips, resume, clear errors."""

from __future__ import annotations

import uuid
from pathlib import Path

import fsspec
import pytest

from annotate_helpers import make_synthetic, steerable
from steerable.annotate.config import AnnotateConfig
from steerable.annotate.run import annotate
from steerable.annotate.staging import MissingFilesystemError, Staging
from steerable.errors import ConfigError
from steerable.testing.server import TestServer
from steerable.testing.server.plausible import plausible_responder

ROWS = [{"role": "user", "content": "pick the cup", "timestamp": 0.5}, {"style": "é", "n": 3}]


def _save(staging: Staging, episode: int = 7, module: str = "plan") -> None:
    staging.save(episode, module, ROWS, fingerprint="abc123", meta={"k": 1}, notes=["a note"])


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_file_url_round_trip_writes_the_same_bytes_as_a_local_path(tmp_path: Path) -> None:
    local, url = Staging(tmp_path / "local"), Staging((tmp_path / "url").as_uri())
    for staging in (local, url):
        _save(staging)
        loaded = staging.load(7, "plan")
        assert loaded is not None and loaded.rows == ROWS and loaded.notes == ["a note"]
        assert staging.is_current(7, "plan", "abc123") and not staging.is_current(7, "plan", "other")
        assert staging.modules_staged(7) == ["plan"] and staging.load(8, "plan") is None
    files = _files(tmp_path / "url")
    assert files == _files(tmp_path / "local")  # byte-identical staging files, and no temp files left
    assert sorted(files) == ["episode_000007/plan.done.json", "episode_000007/plan.jsonl"]


def test_memory_url_round_trip_and_the_marker_makes_it_done() -> None:
    url = f"memory://staging-{uuid.uuid4().hex}/run"
    staging = Staging(url)
    fs = fsspec.filesystem("memory")
    rows_path = f"{url.removeprefix('memory://')}/episode_000007/plan.jsonl"
    fs.pipe_file("/" + rows_path, b'{"orphan": true}\n')  # rows without a marker: not staged
    assert staging.load(7, "plan") is None and staging.modules_staged(7) == []
    _save(staging)
    assert staging.load(7, "plan").rows == ROWS  # type: ignore[union-attr]
    assert Staging(url).modules_staged(7) == ["plan"]  # another Staging on the same URL sees it
    fs.pipe_file("/" + rows_path, b'{"tampered": true}\n')
    assert staging.load(7, "plan") is None  # the marker's hash no longer matches the rows


def test_missing_protocol_package_and_unknown_protocol_fail_when_constructed() -> None:
    with pytest.raises(MissingFilesystemError, match="'s3fs'"):
        Staging("s3://bucket/run")
    with pytest.raises(ConfigError, match="nosuchproto"):
        Staging("nosuchproto://x/y")


def test_cli_staging_url_with_a_missing_package_is_one_line(tmp_path: Path) -> None:
    root = make_synthetic(tmp_path / "ds", episodes=1)
    with TestServer(responder=plausible_responder) as server:
        proc = steerable(
            "annotate", "--root", str(root), "--vlm.base_url", server.url, "--vlm.model_id", "m",
            "--staging_dir", "s3://bucket/run", "--executor.progress", "false",
        )
        assert server.stats.completed == 0  # refused before any call
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "s3fs" in lines[0] and "Traceback" not in proc.stderr


def test_a_run_resumes_from_a_url_staging(tmp_path: Path) -> None:
    root = make_synthetic(tmp_path / "ds", episodes=2)
    url = f"memory://resume-{uuid.uuid4().hex}"
    with TestServer(responder=plausible_responder) as server:
        cfg = AnnotateConfig(
            root=root, staging_dir=url, vlm={"base_url": server.url, "model_id": "test-model"},
            executor={"progress": False},
        )
        first = annotate(cfg)
        calls = server.stats.completed
        second = annotate(cfg)
        assert server.stats.completed == calls  # everything came from the URL staging
    assert first.episodes_annotated == 2 and first.episodes_resumed == 0
    assert second.episodes_annotated == 2 and second.episodes_resumed == 2
    assert not (root / ".steerable" / "staging").exists()  # nothing staged beside the dataset
    assert Staging(url).modules_staged(0) == sorted(first.modules)
