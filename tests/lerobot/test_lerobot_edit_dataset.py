"""steerable's data through LeRobot's own `lerobot-edit-dataset`, then steerable's tools on the result.

Each operation runs with the command line a LeRobot user types, on a synthetic dataset with oracle
language (an interjection and its `say` reply in every episode) and a person's review (`steerable view
--edit`'s records: one episode's interjection corrected and sent back as "needs work", two marked
reviewed). The command's own entry function
runs in this process (what the `lerobot-edit-dataset` script calls; LeRobot imports once, not per
operation), and so do steerable's commands.
LeRobot keeps the language columns (checked row for row against the source); where it drops the
tool catalogue, the provenance or the ground truth, `steerable info` says so in one line naming
`steerable restore`, `steerable eval` names it in its error, and after the restore `eval` scores the
episodes that remain against their own ground truth and the review records are back under the new
episode indices (so `annotate` leaves the reviewed episodes alone). LeRobot does not copy the revisions
(`.steerable/`) into a new dataset. `render` and `annotate` run on every result.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import sys
from pathlib import Path
from unittest import mock

import pytest
from lerobot.scripts import lerobot_edit_dataset

from steerable.cli.main import main
from steerable.dataset import LeRobotDataset
from steerable.dataset.lineage import match_episodes
from steerable.dataset.review import episode_rows, human_edits, review_status, save_episode
from steerable.language.rows import rows_from_arrow
from steerable.synthetic import read_ground_truth

LANGUAGE = ["language_persistent", "language_events"]


def steerable(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def edit(*args: str) -> None:
    """`lerobot-edit-dataset ARGS`: the script's function, reading the same argv."""
    with mock.patch.object(sys, "argv", ["lerobot-edit-dataset", *args]):
        lerobot_edit_dataset.edit_dataset()


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("lerobot_edit") / "source"
    code, _, err = steerable("make-dataset", "synthetic", "--out", str(root), "--episodes", "4", "--fps", "5",
                             "--with_language", "--interjection_rate", "1")
    assert code == 0, err
    ds = LeRobotDataset(root)
    rows = episode_rows(ds, 2)
    events = [(t, {**r, "content": "hold on, the blue bin"} if r.get("style") == "interjection" else r)
              for t, r in rows.events]
    save_episode(ds, 2, None, events, status="needs work")
    save_episode(ds, 1, None, None, status="reviewed")
    save_episode(ds, 3, None, None, status="reviewed")
    assert reviews_of(root) == ({"interjection": [2]}, {1: "reviewed", 2: "needs work", 3: "reviewed"})
    return root


def reviews_of(root: Path) -> tuple[dict[str, list[int]], dict[int, str]]:
    ds = LeRobotDataset(root)
    return human_edits(ds), review_status(ds)


def assert_reviews_follow(root: Path, source: Path, mapping: dict[int, int]) -> None:
    """`root` holds the source's review records of the episodes it kept, under its own episode indices."""
    human, status = reviews_of(source)
    moved = {style: sorted(t for t, s in mapping.items() if s in eps) for style, eps in human.items()}
    assert reviews_of(root) == ({k: v for k, v in moved.items() if v},
                                {t: status[s] for t, s in sorted(mapping.items()) if s in status})


def assert_language_survived(result: Path, source: Path) -> dict[int, int]:
    """Every episode of `result` holds its source episode's rows exactly; returns result -> source episode."""
    mine, theirs = LeRobotDataset(result), LeRobotDataset(source)
    match = match_episodes(mine, [theirs])
    assert not match.unmatched
    mapping = match.from_source(0)
    for ep, src in mapping.items():
        a, b = mine.read_episode(ep, LANGUAGE), theirs.read_episode(src, LANGUAGE)
        for column in LANGUAGE:
            assert rows_from_arrow(a.column(column)) == rows_from_arrow(b.column(column)), (ep, src, column)
    return mapping


def info_of(root: Path) -> tuple[dict, str]:
    code, out, err = steerable("info", str(root), "--json")
    assert code == 0, err
    code, human, err = steerable("info", str(root))
    assert code == 0, err
    return json.loads(out), human


def assert_lost_and_noticed(root: Path) -> None:
    summary, human = info_of(root)
    assert summary["missing_metadata"] == ['tool catalogue (info.json "tools")',
                                           "provenance (meta/steerable_provenance.json)"]
    assert summary["producers"] == {} and "?" not in human.split("Language")[1]
    assert summary["review"] == {} and summary["human"] == {} and "Review: not recorded" in human
    assert not (root / ".steerable").exists()  # the revisions stay with the source
    notes = [line for line in human.splitlines() if line.startswith("note:")]
    assert len(notes) == 1 and f"`steerable restore {root} --from SOURCE`" in notes[0], human
    code, _, err = steerable("eval", str(root), "--labels", "exact", "--resamples", "10")
    assert code == 2 and f"`steerable restore {root} --from SOURCE` copies it back" in err, err


def assert_steerable_tools_work(root: Path, source: Path, mapping: dict[int, int], tmp: Path) -> None:
    """info shows everything recorded; eval scores against each episode's own truth; render, annotate run."""
    summary, human = info_of(root)
    assert summary["missing_metadata"] == [] and "note:" not in human
    assert summary["producers"] == info_of(source)[0]["producers"] and summary["language"]["tools"] == ["say"]
    assert_reviews_follow(root, source, mapping)
    assert "Review: " in human and "Review: not recorded" not in human
    truth, original = read_ground_truth(root), read_ground_truth(source)
    assert sorted(truth) == sorted(mapping)
    assert all(truth[ep].subtasks == original[src].subtasks for ep, src in mapping.items())
    code, out, err = steerable("eval", str(root), "--json", "--labels", "exact", "--resamples", "10")
    assert code == 0, err
    scored = json.loads(out)
    assert scored["episodes"] == len(mapping) and scored["metrics"]["seg_f1_50"] == 1.0  # oracle rows vs truth
    code, out, err = steerable("render", str(root), "--recipe", "subtask_mem", "--episode", "0", "--json")
    assert code == 0, err
    assert sum(json.loads(line).get("messages") is not None for line in out.splitlines()[:-1]) > 0
    annotated = tmp / f"{root.name}_annotated"
    # Unnamed (no plan rows of its own), so the oracle's plans stay and their producer must be carried over.
    code, out, err = steerable("annotate", "--root", str(root), "--output_dir", str(annotated),
                               "--motion.name_from_task", "false")
    assert code == 0, err + out
    run = json.loads((annotated / ".steerable" / "run_summary.json").read_text())
    assert run["episodes_selected"] == sum(s == 0 for s in mapping.values())  # the reviewed ones are left alone
    assert "note: " + str(annotated) + " lacks" not in out  # its existing rows' producers are recorded
    after, _ = info_of(annotated)
    assert after["producers"]["motion"] == "heuristic:motion" and after["producers"]["plan"] == "synthetic:oracle"


def test_delete_episodes(source: Path, tmp_path: Path) -> None:
    out = tmp_path / "deleted"
    edit("--repo_id", "local/source", "--root", str(source), "--new_root", str(out),
         "--operation.type", "delete_episodes", "--operation.episode_indices", "[1]")
    mapping = assert_language_survived(out, source)
    assert mapping == {0: 0, 1: 2, 2: 3}  # LeRobot renumbers the episodes it keeps
    assert_lost_and_noticed(out)
    code, said, err = steerable("restore", str(out), "--from", str(source))
    assert code == 0, err
    assert "matched 3 of 3 episodes" in said and "ground truth: 3 episode(s)" in said
    assert "review records: needs work episode(s) 1; reviewed episode(s) 2; human interjection episode(s) 1" in said
    assert_steerable_tools_work(out, source, mapping, tmp_path)


def test_restore_leaves_behind_the_review_records_of_rows_changed_since(source: Path, tmp_path: Path) -> None:
    from steerable.dataset.writer import EpisodeLanguage, write_language

    out = tmp_path / "deleted"
    edit("--repo_id", "local/source", "--root", str(source), "--new_root", str(out),
         "--operation.type", "delete_episodes", "--operation.episode_indices", "[1]")
    ds = LeRobotDataset(out)
    rows = episode_rows(ds, 1)  # source episode 2: a person's interjection, "needs work"
    rewritten = [{**r, "content": "another subtask"} if r["style"] == "subtask" else r for r in rows.persistent]
    write_language(ds, {1: EpisodeLanguage(rewritten, rows.events)})  # changed after LeRobot's step
    code, said, err = steerable("restore", str(out), "--from", str(source))
    assert code == 0, err
    assert "warning: episode(s) 1: the language rows differ from the source episode's" in said
    assert reviews_of(out) == ({}, {2: "reviewed"})  # only what still speaks of the rows a person saw


def test_split_then_merge(source: Path, tmp_path: Path) -> None:
    base = tmp_path / "splits"
    edit("--repo_id", "local/source", "--root", str(source), "--new_root", str(base),
         "--operation.type", "split", "--operation.splits", '{"train": [0, 2], "val": [1, 3]}')
    for part in ("train", "val"):
        assert_language_survived(base / part, source)
        assert_lost_and_noticed(base / part)
        assert steerable("restore", str(base / part), "--from", str(source))[0] == 0
    merged = tmp_path / "merged"
    edit("--new_repo_id", "local/merged", "--new_root", str(merged), "--operation.type", "merge",
         "--operation.repo_ids", "['local/train', 'local/val']",
         "--operation.roots", f"['{base / 'train'}', '{base / 'val'}']")
    mapping = assert_language_survived(merged, source)
    assert mapping == {0: 0, 1: 2, 2: 1, 3: 3}
    assert_lost_and_noticed(merged)
    code, said, err = steerable("restore", str(merged), "--from", str(base / "train"), "--from", str(base / "val"))
    assert code == 0, err
    assert "matched 4 of 4 episodes: 2 from" in said and "ground truth: 4 episode(s)" in said
    assert_steerable_tools_work(merged, source, mapping, tmp_path)


def test_remove_feature(source: Path, tmp_path: Path) -> None:
    out = tmp_path / "top_only"
    edit("--repo_id", "local/source", "--root", str(source), "--new_root", str(out),
         "--operation.type", "remove_feature", "--operation.feature_names", "['observation.images.wrist']")
    mapping = assert_language_survived(out, source)
    assert_lost_and_noticed(out)
    assert steerable("restore", str(out), "--from", str(source))[0] == 0
    truth = json.loads((out / "meta" / "steerable_ground_truth.json").read_text())
    assert list(truth["cameras"]) == ["observation.images.top"]  # the boxes of the removed camera go too
    assert all(list(e["boxes"]) == ["observation.images.top"] for e in truth["episodes"])
    assert_steerable_tools_work(out, source, mapping, tmp_path)


def test_modify_tasks_in_place_keeps_everything(source: Path, tmp_path: Path) -> None:
    copy = tmp_path / "retasked"
    shutil.copytree(source, copy)
    save_episode(LeRobotDataset(copy), 1, None, None, status="needs work")  # two saves in the copy itself,
    save_episode(LeRobotDataset(copy), 1, None, None, status="reviewed")  # so its live files are the last ones
    snapshots = {p.name: p.read_bytes() for p in (copy / ".steerable" / "revisions" / "files").iterdir()}
    old = LeRobotDataset(copy).task_of(LeRobotDataset(copy).episodes[0])
    edit("--repo_id", "local/retasked", "--root", str(copy), "--operation.type", "modify_tasks",
         "--operation.task_replacements", json.dumps({old: "tidy the table"}))
    # LeRobot rewrites info.json and the shards in place (through their inodes): the revisions keep their bytes
    assert {p.name: p.read_bytes() for p in (copy / ".steerable" / "revisions" / "files").iterdir()} == snapshots
    info = json.loads((copy / "meta" / "info.json").read_text())
    assert "steerable" not in info and info["tools"]  # the provenance is in its own file, which LeRobot keeps
    assert LeRobotDataset(copy).task_of(LeRobotDataset(copy).episodes[0]) == "tidy the table"
    mapping = assert_language_survived(copy, source)
    assert_steerable_tools_work(copy, source, mapping, tmp_path)  # the provenance file stood in; no restore


def test_reencode_videos_keeps_everything(source: Path, tmp_path: Path) -> None:
    out = tmp_path / "reencoded"
    edit("--repo_id", "local/source", "--root", str(source), "--new_root", str(out),
         "--operation.type", "reencode_videos", "--operation.rgb_encoder.vcodec", "h264",
         "--operation.rgb_encoder.crf", "40")
    video = next((out / "videos" / "observation.images.top").rglob("*.mp4"))
    assert video.read_bytes() != next((source / "videos" / "observation.images.top").rglob("*.mp4")).read_bytes()
    ds = LeRobotDataset(out)
    frames = ds.decode_frames(0, "observation.images.top", [0.0, 1.0])
    assert len(frames) == 2 and frames[0].ndim == 3
    mapping = assert_language_survived(out, source)
    assert_steerable_tools_work(out, source, mapping, tmp_path)


def test_recompute_stats_fails_in_lerobot_on_any_language_column(source: Path, tmp_path: Path) -> None:
    """LeRobot 0.6.1 computes stats of the `language` columns too and fails (with LeRobot's own annotated
    datasets as well); docs/lerobot.md says so. The source is left as it was."""
    before = (source / "meta" / "stats.json").read_bytes()
    with pytest.raises(ValueError, match="all input arrays must have the same shape"):
        edit("--repo_id", "local/source", "--root", str(source), "--new_root", str(tmp_path / "stats"),
             "--operation.type", "recompute_stats")
    assert (source / "meta" / "stats.json").read_bytes() == before
