"""Revisions of a person's corrections (`steerable.dataset.review`, `steerable revisions`), what `info`
and the card say of them, `annotate` leaving reviewed episodes alone, `eval` between two revisions
with the edit cost, and the review ordering of the episodes."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pytest

from steerable.dataset import LeRobotDataset
from steerable.dataset.hub import dataset_card
from steerable.dataset.parquet import read_parquet
from steerable.dataset.review import (
    episode_rows,
    human_edits,
    protected_episodes,
    restore_revision,
    review_status,
    revision_changes,
    save_episode,
)
from steerable.dataset.revisions import checkout, edit_cost, file_at, list_revisions, parse_revision_spec
from steerable.errors import LanguageSchemaError
from steerable.language.styles import LANGUAGE_EVENTS, LANGUAGE_PERSISTENT
from steerable.viewer.uncertainty import keystate_times, uncertainty
from test_viewer_edit import copy_dataset, dataset_state
from viewer_data import steerable


@pytest.fixture
def ds(viewer_ds: Path, tmp_path: Path) -> LeRobotDataset:
    return LeRobotDataset(copy_dataset(viewer_ds, tmp_path / "ds"))


def subtasks(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted((r for r in rows if r["style"] == "subtask"), key=lambda r: r["timestamp"])


def language_cells(root: Path, episode: int) -> tuple[Any, Any]:
    """The episode's stored language cells, as Arrow arrays (compared byte for byte by `equals`)."""
    path = sorted(root.glob("data/*/*.parquet"))[0]
    table = read_parquet(path, ["episode_index", LANGUAGE_PERSISTENT, LANGUAGE_EVENTS])
    table = table.filter(pc.equal(table.column("episode_index"), episode))
    return table.column(LANGUAGE_PERSISTENT).combine_chunks(), table.column(LANGUAGE_EVENTS).combine_chunks()


def test_a_save_is_a_revision_and_going_back_restores_the_bytes(ds: LeRobotDataset) -> None:
    original = dataset_state(ds.root)
    rows = episode_rows(ds, 1)
    persistent = [dict(r) for r in rows.persistent]
    second = subtasks(persistent)[1]
    second["timestamp"] = float(rows.timestamps[40])
    second["content"] = "grasp the cube"
    first = save_episode(ds, 1, persistent, None, ops={"move": 1, "retype": 1})
    assert first is not None and first.id == 1 and first.styles == {"1": ["subtask"]}
    assert human_edits(ds) == {"subtask": [1]} and protected_episodes(ds) == {1}
    edited = dataset_state(ds.root)
    assert edited != original
    assert save_episode(ds, 1, persistent, None) is None  # the same rows again: nothing to save
    status = save_episode(ds, 2, None, None, status="needs work")
    assert status is not None and status.status == {"2": "needs work"} and review_status(ds) == {2: "needs work"}
    assert protected_episodes(ds) == {1}  # needs work: annotate may redo it

    with pytest.raises(LanguageSchemaError, match="matches no frame"):
        save_episode(ds, 0, [{**persistent[0], "timestamp": 0.0123}], None)
    assert [r.id for r in list_revisions(ds.root)] == [1, 2]  # the invalid save wrote nothing

    (change,) = revision_changes(ds.root, 1)
    assert change["style"] == "subtask" and any("grasp the cube" in line for line in change["added"])
    assert file_at(ds.root, 0, "meta/info.json") == ds.root / ".steerable/revisions/files/0001.before.meta%2Finfo.json"

    back = restore_revision(ds, 0)
    assert back is not None and back.restored_from == 0 and back.id == 3
    assert dataset_state(ds.root) == original  # the old bytes, all of them
    assert human_edits(ds) == {} and review_status(ds) == {}
    again = restore_revision(ds, 1)  # going back is a revision too: forward again
    assert again is not None and dataset_state(ds.root) == edited
    assert restore_revision(ds, 1) is None
    with checkout(ds.root, 0) as old:
        assert dataset_state(old) == original
        assert not (old / ".steerable").exists()
    assert parse_revision_spec(f"{ds.root}@r3") == (ds.root, 3) and parse_revision_spec(str(ds.root)) is None


def test_cli_lists_shows_and_goes_back_and_info_names_the_person(ds: LeRobotDataset) -> None:
    original = dataset_state(ds.root)
    assert "has no revisions" in steerable("revisions", str(ds.root)).stdout
    rows = episode_rows(ds, 0)
    persistent = [dict(r) for r in rows.persistent]
    subtasks(persistent)[0]["content"] = "pick up the green cube first"
    save_episode(ds, 0, persistent, None, ops={"retype": 1}, status="reviewed")

    listed = steerable("revisions", str(ds.root))
    assert listed.returncode == 0 and "r1" in listed.stdout and "1 retype" in listed.stdout
    shown = steerable("revisions", str(ds.root), "--show", "1")
    assert "+ 0.000s assistant: pick up the green cube first" in shown.stdout and "episode 0 reviewed" in shown.stdout
    info = steerable("info", str(ds.root))
    assert "heuristic:motion; human: episode(s) 0" in info.stdout and "1 reviewed" in info.stdout
    as_json = json.loads(steerable("info", str(ds.root), "--json").stdout)
    assert as_json["human"] == {"subtask": [0]} and as_json["review"]["reviewed"] == 1
    assert "| subtask | heuristic:motion; human (episodes 0) |" in dataset_card(ds.root)
    missing = steerable("revisions", str(ds.root), "--show", "9")
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1 and "no revision 9" in missing.stderr

    back = steerable("revisions", str(ds.root), "--restore", "0")
    assert back.returncode == 0 and "saved as revision 2" in back.stdout, back.stderr
    assert dataset_state(ds.root) == original


def test_annotate_after_a_review_keeps_the_reviewed_episodes_byte_for_byte(ds: LeRobotDataset) -> None:
    from steerable.dataset.writer import EpisodeLanguage, write_language

    rows = episode_rows(ds, 1)
    persistent = [dict(r) for r in rows.persistent]
    subtasks(persistent)[1]["content"] = "a person's subtask"
    save_episode(ds, 1, persistent, None)  # corrected
    save_episode(ds, 2, None, None, status="reviewed")  # looked at, nothing to fix
    # episode 0's subtasks spoilt behind annotate's back: the rerun must rewrite them (it runs at all)
    r0 = episode_rows(ds, 0)
    spoilt = [{**r, "content": "spoilt"} if r["style"] == "subtask" else r for r in r0.persistent]
    write_language(ds, {0: EpisodeLanguage(persistent=spoilt, events=r0.events)})
    kept = {ep: language_cells(ds.root, ep) for ep in (1, 2)}

    run = steerable("annotate", "--root", str(ds.root), "--executor.progress", "false")
    assert run.returncode == 0, run.stderr
    assert "leaving episode(s) 1-2 as a person reviewed them" in run.stderr
    for ep in (1, 2):
        persistent_now, events_now = language_cells(ds.root, ep)
        assert persistent_now.equals(kept[ep][0]) and events_now.equals(kept[ep][1])
    assert "spoilt" not in {r["content"] for r in episode_rows(LeRobotDataset(ds.root), 0).persistent}

    redo = steerable("annotate", "--root", str(ds.root), "--executor.progress", "false", "--include_reviewed", "true")
    assert redo.returncode == 0, redo.stderr
    assert "a person's subtask" not in {r["content"] for r in episode_rows(LeRobotDataset(ds.root), 1).persistent}


def test_eval_between_two_revisions_reports_the_edit_cost(ds: LeRobotDataset) -> None:
    rows = episode_rows(ds, 1)
    persistent = [dict(r) for r in rows.persistent]
    subtasks(persistent)[1]["timestamp"] = float(rows.timestamps[60])
    save_episode(ds, 1, persistent, None, ops={"move": 1})
    rows = episode_rows(ds, 2)
    persistent = [dict(r) for r in rows.persistent]
    subtasks(persistent)[2]["content"] = "put it down"
    persistent.append({**subtasks(persistent)[0], "timestamp": float(rows.timestamps[10])})
    save_episode(ds, 2, persistent, None, ops={"retype": 1, "split": 1, "status": 1})
    assert edit_cost(ds.root, 0, 2) == {"move": 1, "retype": 1, "split": 1, "status": 1}

    run = steerable("eval", f"{ds.root}@r0", "--gold", f"{ds.root}@r2", "--resamples", "0", "--labels", "normalized",
                    "--json")
    assert run.returncode == 0, run.stderr
    body = json.loads(run.stdout)
    cost = body["edit_cost"]
    minutes = ds.total_frames / ds.fps / 60
    assert cost["edits"] == 3 and cost["video_minutes"] == pytest.approx(minutes, abs=1e-3)
    assert cost["edits_per_minute"] == pytest.approx(3 / minutes, rel=1e-3)
    assert body["dataset"] == f"{ds.root}@r0" and body["gold"] == f"{ds.root}@r2"
    assert body["metrics"]["seg_f1_50"] < 1.0  # the correction is not what the model wrote
    text = steerable("eval", f"{ds.root}@r0", "--gold", f"{ds.root}@r2", "--resamples", "0", "--labels", "normalized")
    assert "edit cost r0 -> r2: 1 boundary moves, 1 retypes, 1 splits over" in text.stdout, text.stdout
    assert not [p for p in ds.root.parent.iterdir() if "steerable-rev" in p.name]  # the checkouts are gone


def test_a_checkout_killed_with_sigkill_is_cleaned_by_the_next(ds: LeRobotDataset) -> None:
    """`DS@rN` is read from a checkout beside the dataset; a reader killed with `kill -9` cannot remove
    it, so the next checkout removes it (never a live reader's)."""
    import signal
    import subprocess
    import sys

    from steerable.dataset.revisions import checkout

    code = ("import sys, time; from steerable.dataset.revisions import checkout\n"
            f"with checkout({str(ds.root)!r}, 0) as d:\n    print(d, flush=True); time.sleep(60)\n")
    reader = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        left = Path(reader.stdout.readline().strip()).parent  # type: ignore[union-attr]
        assert left.is_dir() and left.parent == ds.root.parent
        with checkout(ds.root, 0) as mine:
            assert left.is_dir(), "a live reader's checkout stays"
        assert not mine.exists()
        reader.send_signal(signal.SIGKILL)
        reader.wait(timeout=30)
        assert left.is_dir()
        with checkout(ds.root, 0) as again:
            assert not left.exists(), "the killed reader's checkout is gone"
            assert (again / "meta" / "info.json").is_file()
    finally:
        reader.kill()
        reader.wait()
    assert not [p for p in ds.root.parent.iterdir() if "steerable-rev" in p.name]


def test_the_least_certain_episodes_come_first(ds: LeRobotDataset) -> None:
    keys = {e.episode_index: keystate_times(ds, e.episode_index) for e in ds.episodes}
    assert all(keys.values())  # the synthetic episodes grip and pause
    calm = uncertainty(ds, keys)
    rows = episode_rows(ds, 2)
    persistent = [dict(r) for r in rows.persistent]
    cuts = {round(k * ds.fps) for k in keys[2]}
    far = next(f for f in range(20, len(rows.timestamps) - 20)
               if all(abs(f - c) > ds.fps for c in cuts))  # over a second from any keystate
    persistent.append({**subtasks(persistent)[0], "timestamp": float(rows.timestamps[far])})
    persistent.append({**subtasks(persistent)[0], "timestamp": float(rows.timestamps[far + 1])})  # a 1-frame span
    save_episode(ds, 2, persistent, None)
    order = uncertainty(ds, keys)
    assert order[0]["episode_index"] == 2 and order[0]["score"] > max(u["score"] for u in calm)
    reasons = " ".join(order[0]["reasons"])
    assert "from any keystate" in reasons and "far from the usual" in reasons
    other = {2: [0.0, 1.0, 2.0, 3.0]}
    disagreeing = uncertainty(ds, keys, against=[("other run", other)])
    assert any("disagree with other run" in r for u in disagreeing for r in u["reasons"])


def test_state_hashes_cover_the_files_a_save_changes(ds: LeRobotDataset) -> None:
    before = dataset_state(ds.root)
    rows = episode_rows(ds, 0)
    save_episode(ds, 0, [dict(r, content="x") if r["style"] == "subtask" else r for r in rows.persistent], None)
    record = list_revisions(ds.root)[-1]
    assert set(record.files) <= set(before) and dataset_state(ds.root) != before
    assert hashlib.sha256((ds.root / record.files[0]).read_bytes()).hexdigest() != before[record.files[0]]


def test_annotate_include_reviewed_takes_the_persons_marks_off_the_rows_it_rewrote(ds: LeRobotDataset) -> None:
    """`--include_reviewed true` replaces a person's rows with the annotator's: those rows are recorded as
    the annotator's, not the person's, and the episode is unreviewed again; a person's rows of a style
    the run does not write stay theirs."""
    rows = episode_rows(ds, 1)
    persistent = [dict(r) for r in rows.persistent]
    subtasks(persistent)[1]["content"] = "a person's subtask"
    events = [(t, {**r, "content": "a person's interjection"} if r.get("style") == "interjection" else r)
              for t, r in rows.events]
    save_episode(ds, 1, persistent, events, status="reviewed")
    save_episode(ds, 2, None, None, status="needs work")
    assert human_edits(ds) == {"interjection": [1], "subtask": [1]}
    assert review_status(ds) == {1: "reviewed", 2: "needs work"}

    redo = steerable("annotate", "--root", str(ds.root), "--executor.progress", "false", "--include_reviewed", "true")
    assert redo.returncode == 0, redo.stderr
    after = LeRobotDataset(ds.root)
    assert "a person's subtask" not in {r["content"] for r in episode_rows(after, 1).persistent}
    assert "a person's interjection" in {r["content"] for _, r in episode_rows(after, 1).events}
    assert human_edits(after) == {"interjection": [1]}  # the subtasks are the annotator's now
    assert review_status(after) == {}  # what the person reviewed (or sent back) was rewritten
    block = json.loads((ds.root / "meta" / "steerable_provenance.json").read_text())
    assert "steerable" not in json.loads((ds.root / "meta" / "info.json").read_text())  # the file only
    assert block["producers"]["subtask"].startswith("heuristic:")
    summary = json.loads(steerable("info", str(ds.root), "--json").stdout)
    assert summary["human"] == {"interjection": [1]} and summary["review"] == {}
    text = steerable("info", str(ds.root)).stdout
    assert "Review:" not in text and "human: episode(s) 1" in text.split("interjection", 1)[1].splitlines()[0]
    assert not any("human" in line for line in text.splitlines() if "subtask" in line)
    again = steerable("annotate", "--root", str(ds.root), "--executor.progress", "false")
    assert again.returncode == 0 and "leaving episode(s) 1 as a person reviewed them" in again.stderr  # interjection
