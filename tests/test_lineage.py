"""steerable's metadata that LeRobot's dataset tools drop: the one-line notice, the provenance file
(where steerable keeps it, never in info.json), and `steerable restore` (tests/lerobot/ runs the real tools).

Here the drops are made by hand, as LeRobot 0.6.1 makes them: `tools` leaves meta/info.json, and
meta/steerable_ground_truth.json and meta/steerable_provenance.json are not copied.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from annotate_helpers import steerable
from steerable.synthetic import generate_synthetic

GROUND_TRUTH = "meta/steerable_ground_truth.json"
PROVENANCE = "meta/steerable_provenance.json"


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("lineage") / "source"
    return generate_synthetic(root, episodes=3, cameras=("top",), fps=5, with_language=True, interjection_rate=1.0)


def dropped(source: Path, dest: Path, *, keys: tuple[str, ...] = ("tools",),
            files: tuple[str, ...] = (GROUND_TRUTH, PROVENANCE)) -> Path:
    shutil.copytree(source, dest)
    info = json.loads((dest / "meta/info.json").read_text())
    for key in keys:
        del info[key]
    (dest / "meta/info.json").write_text(json.dumps(info, indent=4))
    for name in files:
        (dest / name).unlink()
    return dest


def test_the_provenance_is_a_file_and_not_in_info_json(source: Path, tmp_path: Path) -> None:
    assert "steerable" not in json.loads((source / "meta/info.json").read_text())  # LeRobot would warn about it
    block = json.loads((source / PROVENANCE).read_text())
    copy = dropped(source, tmp_path / "copy", keys=(), files=())  # a LeRobot rewrite of info.json
    shown = steerable("info", str(copy), "--json")
    assert json.loads(shown.stdout)["producers"] == block["producers"]
    assert json.loads(shown.stdout)["missing_metadata"] == []


def test_info_names_what_is_missing_in_one_line(source: Path, tmp_path: Path) -> None:
    copy = dropped(source, tmp_path / "copy")
    human = steerable("info", str(copy))
    assert human.returncode == 0, human.stderr
    notes = [line for line in human.stdout.splitlines() if line.startswith("note:")]
    assert notes == [
        f'note: {copy} lacks tool catalogue (info.json "tools") and provenance ({PROVENANCE}), which '
        f"LeRobot's dataset tools drop: `steerable restore {copy} --from SOURCE` copies them back from the "
        "dataset it was made from"
    ]
    assert "not recorded" in human.stdout and " ? " not in human.stdout
    assert "Tools: say (not declared: steerable's default catalogue)" in human.stdout
    missing = json.loads(steerable("info", str(copy), "--json").stdout)["missing_metadata"]
    assert missing == ['tool catalogue (info.json "tools")', f"provenance ({PROVENANCE})"]


def test_a_missing_tool_catalogue_alone_is_derived(source: Path, tmp_path: Path) -> None:
    copy = dropped(source, tmp_path / "copy", keys=("tools",), files=())
    note = [line for line in steerable("info", str(copy)).stdout.splitlines() if line.startswith("note:")]
    assert note and note[0].endswith(f"`steerable restore {copy}` derives it (steerable's default catalogue)")
    restored = steerable("restore", str(copy))
    assert restored.returncode == 0, restored.stderr
    assert restored.stdout == "tool catalogue: say (derived: steerable's default)\n"
    original = json.loads((source / "meta/info.json").read_text())
    assert json.loads((copy / "meta/info.json").read_text())["tools"] == original["tools"]
    assert steerable("restore", str(copy)).stdout == f"{copy}: nothing to restore\n"


def test_eval_names_restore_and_restore_brings_everything_back(source: Path, tmp_path: Path) -> None:
    copy = dropped(source, tmp_path / "copy")
    failed = steerable("eval", str(copy), "--labels", "exact", "--resamples", "10")
    assert failed.returncode == 2 and "Traceback" not in failed.stderr
    assert f"`steerable restore {copy} --from SOURCE` copies it back" in failed.stderr
    assert "pass --gold FILE_OR_DATASET" in failed.stderr
    restored = steerable("restore", str(copy), "--from", str(source))
    assert restored.returncode == 0, restored.stderr
    assert restored.stdout.splitlines() == [
        f"matched 3 of 3 episodes: 3 from {source}",
        f"tool catalogue: say from {source}",
        f"provenance: interjection, memory, plan, subtask, tool_call from {source}",
        f"ground truth: 3 episode(s) from {source}",
    ]
    for name in ("meta/info.json", GROUND_TRUTH, PROVENANCE):
        assert json.loads((copy / name).read_text()) == json.loads((source / name).read_text()), name
    scored = steerable("eval", str(copy), "--labels", "exact", "--resamples", "10", "--json")
    assert scored.returncode == 0 and json.loads(scored.stdout)["metrics"]["seg_f1_50"] == 1.0
    assert "nothing to restore" in steerable("restore", str(copy), "--from", str(source)).stdout


def test_restore_refuses_a_source_the_episodes_did_not_come_from(source: Path, tmp_path: Path) -> None:
    copy = dropped(source, tmp_path / "copy")
    other = generate_synthetic(tmp_path / "other", episodes=1, cameras=("top",), fps=5, seed=9, with_language=True)
    refused = steerable("restore", str(copy), "--from", str(other))
    assert refused.returncode == 2
    assert f"no episode of {copy} has the frames of an episode of {other}" in refused.stderr


def test_annotate_notes_the_rows_it_found_without_a_producer(source: Path, tmp_path: Path) -> None:
    copy = dropped(source, tmp_path / "copy")
    out = tmp_path / "annotated"
    done = steerable("annotate", "--root", str(copy), "--output_dir", str(out))
    assert done.returncode == 0, done.stderr
    assert (f"note: {out} lacks provenance of the language rows it already had ({PROVENANCE}), which "
            f"LeRobot's dataset tools drop: `steerable restore {out} --from SOURCE`") in done.stdout
    assert json.loads((out / PROVENANCE).read_text())["producers"] == {
        "motion": "heuristic:motion", "subtask": "heuristic:motion", "plan": "heuristic:motion",
        "memory": "heuristic:motion"}
