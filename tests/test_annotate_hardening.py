"""Issue 8, part A, for `annotate`: exit status, up-front checks, partial failures, progress, provenance.

Each test names the class of failure it guards; each failed before the fix.
"""

from __future__ import annotations

import io
import json
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from annotate_helpers import REPO, copy_dataset, file_hashes, make_synthetic, steerable, summary_of
from steerable.annotate.config import AnnotateConfig
from steerable.annotate.engine import Progress
from steerable.annotate.progress import ProgressDisplay
from steerable.annotate.run import annotate
from steerable.annotate.summary import group_notes
from steerable.dataset import open_dataset
from steerable.dataset.hub import dataset_card
from steerable.language import rows_from_arrow
from steerable.testing import ScriptedVLM
from steerable.testing.server import TestServer
from steerable.testing.server.plausible import plausible_responder

MODEL = "test-model"


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_synthetic(tmp_path_factory.mktemp("syn") / "ds", episodes=3)


@pytest.fixture
def ds(synthetic: Path, tmp_path: Path) -> Path:
    return copy_dataset(synthetic, tmp_path / "ds")


def _styles(root: Path, episode: int) -> set[str | None]:
    table = open_dataset(root).read_episode(episode, ["language_persistent", "language_events"])
    persistent = rows_from_arrow(table.column("language_persistent"))[0]
    events = [row for rows in rows_from_arrow(table.column("language_events")) for row in rows]
    return {r["style"] for r in persistent} | {r["style"] for r in events}


def _cfg(root: Path, **extra: Any) -> AnnotateConfig:
    return AnnotateConfig(root=root, executor={"progress": False}, **extra)


def _failing(purpose_prefix: str):
    """A plausible responder whose replies for one call kind are never valid JSON."""

    def responder(messages: list[dict[str, Any]], schema: dict[str, Any], purpose: str) -> Any:
        if purpose.startswith(purpose_prefix):
            return "I cannot answer that."
        return plausible_responder(messages, schema)

    return responder


# -- A.1: every setting checkable against info.json fails at once, exit 2, nothing written ----------


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--vqa.cameras", "nosuchcam"], "--vqa.cameras names 'nosuchcam'"),
        (["--motion.gripper_dims", "99"], "--motion.gripper_dims: index 99 is out of range"),
        (["--motion.state_key", "observation.nothing"], "--motion.state_key: 'observation.nothing' is not"),
    ],
)
def test_settings_the_dataset_cannot_satisfy_stop_before_anything_runs(
    ds: Path, flags: list[str], message: str
) -> None:
    before = file_hashes(ds, skip_work_dir=False)
    result = steerable("annotate", "--root", str(ds), *flags)
    assert result.returncode == 2, result.stdout + result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("steerable: error:")]
    assert len(errors) == 1 and message in errors[0], result.stderr
    assert file_hashes(ds, skip_work_dir=False) == before  # not even a staging folder


def test_exit_1_names_the_failed_episodes_last_and_allow_failures_makes_it_0(writable_copy) -> None:
    root = writable_copy("so101_record_test")  # its mp4 files are absent
    with TestServer(responder=plausible_responder, model_ids=[MODEL]) as server:
        vlm = ["--vlm.base_url", server.url, "--vlm.model_id", MODEL, "--vlm.backoff_base_s", "0.01"]
        result = steerable("annotate", "--root", str(root), "--only_episodes", "0", *vlm)
        assert result.returncode == 1, result.stderr
        last = result.stdout.splitlines()[-2:]
        assert last[0].startswith("failed: episode 0: ") and "1 of 1 episodes" in last[1]
        again = steerable("annotate", "--root", str(root), "--only_episodes", "0", "--allow_failures", *vlm)
    assert again.returncode == 0, again.stderr
    assert summary_of(root)["episodes_annotated"] == 0


# -- A.6: a failed call costs only its own rows; dependants of a failed module fail only themselves --


def test_a_failed_acknowledgement_keeps_every_other_row(ds: Path) -> None:
    summary = annotate(_cfg(ds), vlm=ScriptedVLM(_failing("interjections.acknowledge"), record=False))
    assert summary.complete and summary.episodes_annotated == 3
    styles = _styles(ds, 0)
    assert {"subtask", "plan", "memory", "motion", "vqa", "interjection"} <= styles
    assert any("acknowledgement call failed" in note and "3 episodes: 0-2" in note for note in summary.notes)


def test_a_failed_module_fails_its_dependants_only(ds: Path) -> None:
    summary = annotate(_cfg(ds), vlm=ScriptedVLM(_failing("plan."), record=False))
    assert not summary.complete and summary.episodes_annotated == 0
    failure = summary.failures[0]
    assert set(failure.failed_modules) == {"plan", "interjections"}
    assert "needs the plan output" in failure.failed_modules["interjections"]
    assert failure.written_modules == ["motion", "vqa"]
    styles = _styles(ds, 0)
    assert {"motion", "vqa"} <= styles and not styles & {"plan", "subtask", "interjection"}
    assert summary.per_module["plan"].failed == 3 and summary.per_module["vqa"].episodes == 3
    # A re-run with a working model redoes only what failed and completes the episodes.
    again = annotate(_cfg(ds), vlm=ScriptedVLM(_failing("nothing"), record=False))
    assert again.complete and {"plan", "subtask", "interjection"} <= _styles(ds, 0)


# -- A.5: progress lines in a run without a terminal ----------------------------------------------


def test_progress_lines_every_n_seconds_without_a_terminal() -> None:
    import asyncio

    stream = io.StringIO()  # not a TTY
    progress = Progress(total=4, done=1, failed=1, started_at=time.monotonic() - 2)

    async def run() -> None:
        async with ProgressDisplay(progress, ScriptedVLM(_failing("nothing")), every_s=0.05, stream=stream):
            await asyncio.sleep(0.3)

    asyncio.run(run())
    lines = stream.getvalue().splitlines()
    assert len(lines) >= 3
    assert all("episodes 2/4 (done 1, failed 1" in line and "calls/s" in line and "ETA" in line for line in lines)


def test_a_cli_run_in_a_pipe_logs_progress_to_stderr(ds: Path) -> None:
    result = steerable("annotate", "--root", str(ds), "--executor.progress_every_s", "0.01")
    assert result.returncode == 0, result.stderr
    assert "annotate: episodes 3/3 (done 3, failed 0" in result.stderr


# -- A.7: provenance where the data goes -----------------------------------------------------------


def test_producers_are_recorded_in_the_provenance_file_the_card_and_info(ds: Path) -> None:
    result = steerable("annotate", "--root", str(ds))
    assert result.returncode == 0, result.stderr
    block = json.loads((ds / "meta" / "steerable_provenance.json").read_text())
    assert block["producers"] == {style: "heuristic:motion" for style in ("motion", "subtask", "plan", "memory")}
    assert "| subtask | heuristic:motion |" in dataset_card(ds)
    shown = steerable("info", str(ds))
    assert any("subtask" in line and "heuristic:motion" in line for line in shown.stdout.splitlines())
    assert json.loads(steerable("info", str(ds), "--json").stdout)["producers"]["motion"] == "heuristic:motion"
    # A model run names the model for the styles it wrote and keeps the motion producer.
    annotate(_cfg(ds), vlm=ScriptedVLM(_failing("nothing"), record=False))
    producers = json.loads((ds / "meta" / "steerable_provenance.json").read_text())["producers"]
    assert producers["subtask"] == producers["vqa"] == "scripted-test-double"
    assert producers["motion"] == "heuristic:motion"


# -- A.8: smaller things ---------------------------------------------------------------------------


def test_a_listening_server_that_never_answers_is_reported_as_silent(ds: Path) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                accepted.append(listener.accept()[0])  # hold the connection, say nothing
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{listener.getsockname()[1]}/v1"
        result = steerable(
            "annotate", "--root", str(ds), "--vlm.base_url", url, "--vlm.model_id", MODEL,
            "--vlm.request_timeout_s", "1",
        )
    finally:
        stop.set()
        thread.join()
        for conn in accepted:
            conn.close()
        listener.close()
    assert result.returncode == 2, result.stdout + result.stderr
    assert "did not answer within 1s" in result.stderr and "cannot reach" not in result.stderr


def test_sheets_blames_its_own_flag(lingzu: Path, tmp_path: Path) -> None:
    result = steerable("sheets", str(lingzu), "--episode", "0", "--out", str(tmp_path / "s"),
                       "--frames_per_second", "7.6")
    assert result.returncode == 2
    assert "--frames_per_second must be above 0 and below 7.5" in result.stderr and "--plan" not in result.stderr


def test_notes_are_grouped_and_counted() -> None:
    notes = group_notes(
        ["run note"],
        {0: ["a dropped", "a dropped", "b"], 1: ["a dropped"], 2: ["a dropped"], 7: ["b"]},
    )
    assert notes == ["run note", "a dropped (4 times in 3 episodes: 0-2)", "b (2 episodes: 0, 7)"]


def test_info_names_episodes_without_video_and_a_misnamed_folder(so101: Path, writable_copy) -> None:
    shown = steerable("info", str(so101))
    assert shown.returncode == 0, shown.stderr
    assert "missing videos:" in shown.stdout and "episode(s) 0" in shown.stdout
    root = writable_copy("lingzu_teleop_4")
    (root / "videos").rename(root / "video")
    shown = steerable("info", str(root))
    assert "rename it to videos/" in shown.stdout
    data = json.loads(steerable("info", str(root), "--json").stdout)
    assert data["cameras"]["image"]["missing_episodes"] == [0, 1, 2, 3]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("plna:\n  enabled: false\n", "unknown key plna (did you mean plan"),
        ("plan:\n  enabeld: false\n", "unknown key plan.enabeld (did you mean plan.enabled?)"),
    ],
)
def test_config_file_typos_get_a_suggestion(ds: Path, tmp_path: Path, text: str, message: str) -> None:
    config = tmp_path / "run.yaml"
    config.write_text(text)
    result = steerable("annotate", "--root", str(ds), "--config", str(config))
    assert result.returncode == 2
    assert f"{config}: {message}" in result.stderr


@pytest.mark.parametrize(
    "flags", [["--plan.window_overlap_s", "100"], ["--output_dir", "{root}"], ["--executor.episode_parallelism", "0"]]
)
def test_no_pydantic_prefixes_in_messages(ds: Path, flags: list[str]) -> None:
    result = steerable("annotate", "--root", str(ds), *(f.format(root=ds) for f in flags))
    assert result.returncode == 2 and "steerable: error:" in result.stderr
    assert "Value error" not in result.stderr and "Assertion failed" not in result.stderr


# -- B.5: help is cheap ----------------------------------------------------------------------------

_HEAVY = ("numpy", "pyarrow", "jsonschema", "PIL")


@pytest.mark.parametrize("argv", [["--help"], ["annotate", "--help"]])
def test_help_imports_no_heavy_library(argv: list[str]) -> None:
    code = (
        "import contextlib, io, sys\n"
        "from steerable.cli.main import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    try:\n"
        f"        main({argv!r})\n"
        "    except SystemExit:\n"
        "        pass\n"
        f"print(','.join(m for m in {_HEAVY!r} if m in sys.modules))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "", f"`steerable {' '.join(argv)}` imported {result.stdout.strip()}"
