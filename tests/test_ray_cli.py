"""`steerable annotate --executor.backend ray` from the real CLI: a local cluster is started for the
run when no address is given; an address nobody answers at is one line, exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from annotate_helpers import copy_dataset, make_synthetic, steerable, summary_of
from steerable.testing.server import TestServer
from steerable.testing.server.plausible import plausible_responder

# The files that start a Ray cluster share one worker of `make test` (tests/conftest.py).
pytestmark = pytest.mark.xdist_group("ray")


def test_cli_runs_on_a_local_ray_cluster(tmp_path: Path) -> None:
    root = copy_dataset(make_synthetic(tmp_path / "src", episodes=2), tmp_path / "ds")
    with TestServer(responder=plausible_responder) as server:
        result = steerable(
            "annotate", "--root", str(root), "--vlm.base_url", server.url, "--vlm.model_id", "test-model",
            "--executor.backend", "ray", "--executor.workers", "1", "--executor.progress_every_s", "0.5",
        )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "annotated 2/2 episodes" in result.stdout
    assert "annotate: episodes 2/2 (done 2" in result.stderr  # the driver's aggregated progress line
    summary = summary_of(root)
    assert summary["failures"] == [] and summary["vlm"]["calls"] > 0


def test_cli_unreachable_cluster_is_one_line(tmp_path: Path) -> None:
    root = make_synthetic(tmp_path / "ds", episodes=1)
    result = steerable("annotate", "--root", str(root), "--executor.backend", "ray",
                       "--executor.address", "127.0.0.1:1")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "steerable: error: --executor.address 127.0.0.1:1: no Ray cluster answers there (Connection refused); "
        "start one with `ray start --head`, or drop the flag for a local cluster"
    ]
    assert not (root / ".steerable").exists()
