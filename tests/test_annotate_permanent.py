"""`steerable annotate`'s last line tells a failure a re-run repeats (a missing video) from one it may
not (the VLM server): the first says which episodes cannot succeed, why, in which dataset, and the
two ways on (`--episodes`, `--allow_failures`); only the second asks for a re-run (#34, item 7)."""

from __future__ import annotations

from pathlib import Path

import pytest

from annotate_helpers import copy_dataset, make_synthetic, steerable, summary_of
from steerable.testing.server import FaultPlan, TestServer
from steerable.testing.server.plausible import plausible_responder

MODEL = "test-model"
RETRY = "re-run the same command to retry"


def _vlm(url: str) -> list[str]:
    return ["--vlm.base_url", url, "--vlm.model_id", MODEL, "--vlm.backoff_base_s", "0.01"]


def test_a_missing_video_is_named_in_the_source_as_permanent_on_every_run(writable_copy, tmp_path: Path) -> None:
    """lingzu_teleop_4 has one video file per episode: without episode 1's, that episode cannot
    succeed. The re-run into the existing copy names the source's file too, not the copy's."""
    source = writable_copy("lingzu_teleop_4")
    (source / "videos" / "image" / "chunk-000" / "file-003.mp4").unlink()  # episode 1's video
    out = tmp_path / "out"
    args = ["annotate", "--root", str(source), "--output_dir", str(out), "--only_episodes", "0,1"]
    with TestServer(responder=plausible_responder, model_ids=[MODEL]) as server:
        runs = [steerable(*args, *_vlm(server.url), timeout=120) for _ in range(2)]
    for run in runs:
        assert run.returncode == 1, run.stdout + run.stderr
        *_, failed, last = run.stdout.splitlines()
        assert failed.startswith("failed: episode 1: ") and str(source / "videos") in failed, failed
        assert str(out / "videos") not in run.stdout
        assert last.startswith(f"1 of 2 episodes cannot succeed as {source} is (missing video: 1)"), last
        assert "a re-run fails them again" in last
        assert "--episodes 0," in last and "--allow_failures" in last
        assert RETRY not in run.stdout
    (failure,) = summary_of(out)["failures"]
    assert failure["permanent"] == {m: "missing video" for m in ("plan", "interjections", "vqa")}


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_synthetic(tmp_path_factory.mktemp("syn") / "ds", episodes=1)


def test_a_server_error_is_retryable_and_says_so(synthetic: Path, tmp_path: Path) -> None:
    root = copy_dataset(synthetic, tmp_path / "ds")
    vqa_only = ["--plan.enabled", "false", "--interjections.enabled", "false", "--vlm.max_retries", "0"]
    failing = FaultPlan(rate=1.0, kinds=["http_500"])
    with TestServer(responder=plausible_responder, model_ids=[MODEL], faults=failing) as server:
        run = steerable("annotate", "--root", str(root), *_vlm(server.url), *vqa_only, timeout=120)
    assert run.returncode == 1, run.stdout + run.stderr
    *_, failed, last = run.stdout.splitlines()
    assert failed.startswith("failed: episode 0: vqa: ") and "HTTP 500" in failed, failed
    assert last.startswith("1 of 1 episodes are not fully annotated") and RETRY in last, last
    assert "cannot succeed" not in run.stdout
    (failure,) = summary_of(root)["failures"]
    assert failure["permanent"] == {}


def test_rows_refused_by_validation_are_asked_again_on_a_re_run(tmp_path: Path, monkeypatch) -> None:
    """A re-run after a validation failure must not reuse the refused rows from staging (it would fail
    the same way forever while saying a retry may help): they are discarded, and asked for again."""
    from steerable.annotate import run as run_module
    from steerable.annotate.config import AnnotateConfig
    from steerable.annotate.run import annotate
    from steerable.testing import ScriptedVLM

    root = copy_dataset(make_synthetic(tmp_path / "src", episodes=1), tmp_path / "ds")
    cfg = AnnotateConfig(root=root, executor={"progress": False})

    def responder(messages, schema, purpose):
        return plausible_responder(messages, schema)

    real = run_module.validate_episode
    monkeypatch.setattr(run_module, "validate_episode", lambda *a, **k: ["a row out of range (forced)"])
    first = annotate(cfg, vlm=ScriptedVLM(responder, record=False))
    assert not first.complete and "validation: 1 problem(s)" in next(iter(first.failures[0].failed_modules.values()))
    monkeypatch.setattr(run_module, "validate_episode", real)
    again = annotate(cfg, vlm=ScriptedVLM(responder, record=False))
    assert again.complete and again.module_runs_resumed == 0
