"""Every command that writes fails with one line and exit 2 on a read-only place, a full disk, or a
path through a file; a closed output pipe ends a command quietly; a bad JSON flag names itself.

Tests run as root, which ignores permission bits, so the read-only place is a read-only tmpfs
mount and the full disk a 16 KiB tmpfs (both need root: without it these tests fail, not skip).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from annotate_helpers import REPO, file_hashes, steerable
from runtime_helpers import recorded_language
from steerable.dataset.lerobot import LeRobotDataset

Command = Callable[[Path, Path], list[str]]  # (dataset, output path) -> CLI arguments


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small synthetic dataset with language (so export has samples)."""
    root = tmp_path_factory.mktemp("oserr") / "ds"
    made = steerable(
        "make-dataset", "synthetic", "--out", str(root), "--episodes", "2", "--cameras", "top",
        "--difficulty", "easy", "--with_language",
    )
    assert made.returncode == 0, made.stderr
    return root


def _kib(path: Path) -> int:
    """The KiB `path` takes on a tmpfs (whole 4 KiB pages)."""
    return -(-path.stat().st_size // 4096) * 4


def _mount(path: Path, options: str) -> Iterator[Path]:
    path.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], capture_output=True, text=True)
    assert done.returncode == 0, f"these tests mount a tmpfs and need root: {done.stderr.strip()}"
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


@pytest.fixture
def read_only(tmp_path: Path) -> Iterator[Path]:
    yield from _mount(tmp_path / "ro", "ro,size=1m")


@pytest.fixture
def full_disk(tmp_path: Path) -> Iterator[Path]:
    yield from _mount(tmp_path / "tiny", "size=16k")


COMMANDS: dict[str, Command] = {
    "annotate --output_dir": lambda ds, out: ["annotate", "--root", str(ds), "--output_dir", str(out)],
    "sheets --out": lambda ds, out: ["sheets", str(ds), "--episode", "0", "--out", str(out)],
    "make-dataset --out": lambda ds, out: [
        "make-dataset", "synthetic", "--out", str(out), "--episodes", "1", "--cameras", "top",
    ],
    "export jsonl": lambda ds, out: [
        "export", str(ds), "--recipe", "subtask_mem", "--out", str(out), "--max_samples", "100",
    ],
    "export hf": lambda ds, out: [
        "export", str(ds), "--recipe", "subtask_mem", "--out", str(out), "--format", "hf", "--max_samples", "100",
    ],
    "view --export": lambda ds, out: ["view", str(ds), "--export", str(out), "--episodes", "0"],
    # --labels normalized: what is checked is the plot's write; loading the embedding model costs 5 s a run.
    "eval --plot": lambda ds, out: ["eval", str(ds), "--plot", str(out), "--labels", "normalized"],
}


def assert_one_line(result: subprocess.CompletedProcess[str], *words: str) -> None:
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("steerable: error:")]
    assert len(errors) == 1, result.stderr
    for word in words:
        assert word in errors[0], errors[0]


@pytest.mark.parametrize("command", list(COMMANDS))
def test_read_only_output(command: str, dataset: Path, read_only: Path) -> None:
    before = file_hashes(dataset, skip_work_dir=False)
    result = steerable(*COMMANDS[command](dataset, read_only / "out"))
    assert_one_line(result, "read-only", str(read_only))
    assert file_hashes(dataset, skip_work_dir=False) == before


@pytest.mark.parametrize("command", list(COMMANDS))
def test_output_path_through_a_file(command: str, dataset: Path, tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("x")
    result = steerable(*COMMANDS[command](dataset, tmp_path / "afile" / "out"))
    assert_one_line(result, "afile", "file")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"], "nothing is left behind"


@pytest.mark.parametrize("command", list(COMMANDS))
def test_no_space_left(command: str, dataset: Path, full_disk: Path) -> None:
    result = steerable(*COMMANDS[command](dataset, full_disk / "out"))
    assert_one_line(result, "no space left")
    if command != "sheets --out":  # sheets writes file by file; the others commit a whole folder
        assert str(full_disk / "out") in result.stderr
        # Only annotate's staging stays (beside the output that is to be), so a re-run resumes.
        kept = [".out.steerable-work"] if command.startswith("annotate") else []
        assert [p.name for p in full_disk.iterdir()] == kept, "no output folder, no half-built one"


def test_in_place_annotate_of_a_read_only_dataset(dataset: Path, read_only: Path) -> None:
    subprocess.run(["mount", "-o", "remount,rw", str(read_only)], check=True)
    copy = read_only / "ds"
    subprocess.run(["cp", "-r", str(dataset), str(copy)], check=True)
    subprocess.run(["mount", "-o", "remount,ro", str(read_only)], check=True)
    result = steerable("annotate", "--root", str(copy))
    assert_one_line(result, "read-only", "--output_dir")


def test_in_place_annotate_on_a_full_disk_leaves_the_dataset_as_it_was(dataset: Path, tmp_path: Path) -> None:
    """Room for the staging but not for the new shards: the commit fails, the dataset is unchanged."""
    used_kib = sum(-(-p.stat().st_size // 4096) * 4 for p in dataset.rglob("*") if p.is_file())
    for disk in _mount(tmp_path / "tiny", f"size={used_kib + 8}k"):
        copy = disk / "ds"
        subprocess.run(["cp", "-r", str(dataset), str(copy)], check=True)
        before = file_hashes(copy, skip_work_dir=False)
        result = steerable("annotate", "--root", str(copy))
        assert_one_line(result, "no space left", str(copy))
        assert file_hashes(copy, skip_work_dir=True) == {k: v for k, v in before.items() if ".steerable" not in k}
        assert [p.name for p in disk.iterdir()] == ["ds"], "no half-built version beside it"


def test_bad_json_flag_names_the_flag(dataset: Path) -> None:
    result = steerable("annotate", "--root", str(dataset), "--vlm.chat_template_kwargs", "{bad")
    assert_one_line(result, "--vlm.chat_template_kwargs", "JSON")


@pytest.mark.parametrize(
    "args",
    [["recipes", "show", "hirobot"], ["render", "{ds}", "--recipe", "subtask_mem", "--all"]],
    ids=["recipes show", "render"],
)
def test_closed_pipe_ends_quietly(args: list[str], dataset: Path) -> None:
    """The reader closes the pipe before anything is written (like `| head` that already has enough)."""
    argv = [a.replace("{ds}", str(dataset)) for a in args]
    proc = subprocess.Popen(
        [sys.executable, "-m", "steerable.cli.main", *argv],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    stderr = proc.stderr.read()
    assert proc.wait(timeout=120) == 141, stderr
    assert stderr == "", stderr


def test_a_run_that_fails_before_writing_leaves_no_output_folder(dataset: Path, tmp_path: Path) -> None:
    """A dataset-level error (no model answers) after the output was chosen: no folder, no leftovers."""
    out = tmp_path / "out"
    result = steerable(
        "annotate", "--root", str(dataset), "--output_dir", str(out),
        "--vlm.base_url", "http://127.0.0.1:9/v1", "--vlm.model_id", "m", "--vlm.max_retries", "0",
    )
    assert_one_line(result)
    assert list(tmp_path.iterdir()) == [], "no output folder and nothing beside it"


# Two short episodes (a second each), then a long one: three pick-and-places, about 17 s of frames.
SESSION = """/task put the orange cube in the blue bin
@1s /reset 4
/task put the purple cube in the yellow bin
@2s /reset 5
"""
LAST = ("/task put the red cube in the yellow bin, then the purple cube in the yellow bin, "
        "then the cyan cube in the yellow bin\n")


def test_run_record_on_a_disk_that_fills_during_the_last_episode_keeps_the_finished_ones(tmp_path: Path) -> None:
    """The disk has room for the session's first two episodes, not for its long last one: the two are
    kept in the recording folder and load; one line names the folder (not a hidden temp path); exit 2."""
    (tmp_path / "two.txt").write_text(SESSION)
    (tmp_path / "three.txt").write_text(SESSION + LAST)
    run = ["run", "--env", "sim", "--seed", "3", "--record"]
    two = steerable(*run, str(tmp_path / "two"), "--commands", str(tmp_path / "two.txt"))
    assert two.returncode == 0, two.stderr
    needed_kib = sum(_kib(p) for p in (tmp_path / "two").rglob("*") if p.is_file())
    for disk in _mount(tmp_path / "tiny", f"size={needed_kib + 64}k"):  # the last episode needs ~250 KiB more
        record = disk / "rec"
        result = steerable(*run, str(record), "--commands", str(tmp_path / "three.txt"))
        assert_one_line(result, "no space left", str(record), "2 of the 3 episodes")
        assert ".steerable-" not in result.stderr and "intact" not in result.stderr, result.stderr
        assert [p.name for p in disk.iterdir()] == ["rec"], "nothing half-built beside it"
        ds = LeRobotDataset(record)
        assert ds.info.total_episodes == 2
        tasks = ["put the orange cube in the blue bin", "put the purple cube in the yellow bin"]
        for episode, task in enumerate(tasks):
            persistent, _, problems = recorded_language(record, episode)
            assert problems == [] and [r["content"] for r in persistent if r["style"] == "task_aug"] == [task]
        assert "2 episodes" in steerable("info", str(record)).stdout


def test_run_record_stops_the_session_where_the_disk_filled(tmp_path: Path) -> None:
    """The disk fills with the second of three episodes: the session stops when that episode ends,
    without playing the third, and the first is kept."""
    first = "/task put the orange cube in the blue bin\n@1s /reset 5\n"
    (tmp_path / "one.txt").write_text(first)
    (tmp_path / "two.txt").write_text(first + LAST + "/reset 4\n")
    (tmp_path / "three.txt").write_text(first + LAST + "/reset 4\n/task put the purple cube in the yellow bin\n")
    run = ["run", "--env", "sim", "--seed", "3", "--record"]
    for name in ("one", "two"):
        done = steerable(*run, str(tmp_path / name), "--commands", str(tmp_path / f"{name}.txt"))
        assert done.returncode == 0, done.stderr
    # The metadata is written at the end. The disk holds the first episode with its metadata (the
    # recording `one`), but not the first episode's files beside the second's (one file group per
    # episode: its parquet and videos are the files `one` lacks): halfway between the two.
    one = {p.relative_to(tmp_path / "one"): _kib(p) for p in (tmp_path / "one").rglob("*") if p.is_file()}
    first_files = sum(kib for path, kib in one.items() if path.parts[0] != "meta")
    second = sum(_kib(p) for p in (tmp_path / "two").rglob("*")
                 if p.is_file() and p.relative_to(tmp_path / "two") not in one)
    assert first_files + second > sum(one.values()), "the second episode's files outweigh the metadata"
    for disk in _mount(tmp_path / "tiny", f"size={(sum(one.values()) + first_files + second) // 2}k"):
        record = disk / "rec"
        result = steerable(*run, str(record), "--commands", str(tmp_path / "three.txt"))
        assert_one_line(result, "no space left", str(record), "the first of the 2 episodes is kept")
        assert "put the purple cube in the yellow bin" not in result.stdout, "the third task never ran"
        assert LeRobotDataset(record).info.total_episodes == 1
