"""Issue 34 item 6: who wrote each style is recorded per episode, so a heuristic's rows are marked.

An annotate run with a model over a dataset where one episode has no video gives that episode the
motion module's stand-in subtasks: the provenance file names `heuristic:motion` for that episode's
subtasks and the model for the others, the viewer marks that episode's subtask track heuristic (and
only that episode's), `export` leaves those rows out unless `--heuristic_rows keep`, and `render`
keeps them unless `--heuristic_rows drop`. Before the fix all of this was per dataset
(`scripted-test-double + heuristic:motion`, `heuristic: False` on every episode) and export kept them.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from annotate_helpers import make_synthetic
from steerable.annotate.config import AnnotateConfig
from steerable.annotate.run import annotate
from steerable.cli.main import main
from steerable.dataset import LeRobotDataset
from steerable.dataset.lineage import EpisodeMatch, restore_info
from steerable.dataset.provenance import Provenance, read_provenance, with_episode_producers
from steerable.dataset.review import episode_rows, save_episode
from steerable.recipes import load_recipe
from steerable.testing import ScriptedVLM
from steerable.testing.server.plausible import plausible_responder
from steerable.train import export_samples
from steerable.viewer.site import ViewerData

MODEL = "scripted-test-double"
NO_VIDEO = 1  # the episode whose video file is missing
PROVENANCE = "meta/steerable_provenance.json"


def _without_video(root: Path, episode: int) -> None:
    """Point the episode's video at a file that does not exist (the others share the real one)."""
    path = next((root / "meta" / "episodes").rglob("*.parquet"))
    table = pq.read_table(path)
    name = next(n for n in table.column_names if n.startswith("videos/") and n.endswith("/file_index"))
    values = table.column(name).to_pylist()
    values[episode] = 7
    i = table.schema.get_field_index(name)
    pq.write_table(table.set_column(i, table.schema.field(name), pa.array(values, table.schema.field(name).type)), path)


@pytest.fixture(scope="module")
def annotated(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    root = make_synthetic(tmp_path_factory.mktemp("prov") / "ds", episodes=3)
    _without_video(root, NO_VIDEO)
    cfg = AnnotateConfig(root=root, executor={"progress": False}, vqa={"enabled": False},
                         interjections={"enabled": False})
    summary = annotate(cfg, vlm=ScriptedVLM(lambda m, schema, purpose: plausible_responder(m, schema), record=False))
    assert [f.episode_index for f in summary.failures] == [NO_VIDEO]  # plan cannot watch it: motion stands in
    return root, summary


@pytest.fixture
def ds(annotated: tuple[Path, Any], tmp_path: Path) -> LeRobotDataset:
    return LeRobotDataset(shutil.copytree(annotated[0], tmp_path / "ds"))


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(argv))
        except SystemExit as exc:  # argparse's own refusals
            code = int(exc.code or 0)
    return code, out.getvalue(), err.getvalue()


def test_the_provenance_file_names_each_episodes_producer(annotated: tuple[Path, Any]) -> None:
    root, summary = annotated
    block = json.loads((root / PROVENANCE).read_text())
    assert block["episodes"]["subtask"] == {"heuristic:motion": "1", MODEL: "0,2"}
    # The episode the plan module could not watch gets its plan and memory from the task's steps too.
    assert block["episodes"]["plan"] == {"heuristic:motion": "1", MODEL: "0,2"}
    assert block["episodes"]["motion"] == {"heuristic:motion": "0-2"}
    # The dataset-level summary readers use stays as it was.
    assert block["producers"]["subtask"] == f"{MODEL} + heuristic:motion"
    assert summary.heuristic_episodes == {"motion": [0, 1, 2], "subtask": [NO_VIDEO], "plan": [NO_VIDEO],
                                          "memory": [NO_VIDEO]}
    provenance = read_provenance(root, LeRobotDataset(root).info)
    assert provenance.producer("subtask", NO_VIDEO) == "heuristic:motion"
    assert provenance.producer("subtask", 0) == MODEL
    assert "subtask" in provenance.heuristic_styles(NO_VIDEO)
    assert "subtask" not in provenance.heuristic_styles(0) | provenance.heuristic_styles(2)


def test_the_viewer_marks_the_heuristic_track_of_that_episode_only(annotated: tuple[Path, Any]) -> None:
    root, _ = annotated
    data = ViewerData(LeRobotDataset(root))

    def subtask_track(episode: int) -> dict[str, Any]:
        payload = data.episode(episode, lambda camera, ep: ("", 0.0))
        return next(t for t in payload["tracks"] if t["style"] == "subtask")

    track = subtask_track(NO_VIDEO)
    assert track["heuristic"] is True and track["producer"] == "heuristic:motion"
    assert data.episode(NO_VIDEO, lambda camera, ep: ("", 0.0))["heuristic"] == ["memory", "motion", "plan", "subtask"]
    for episode in (0, 2):
        track = subtask_track(episode)
        assert track["heuristic"] is False and track["producer"] == MODEL


def test_export_leaves_heuristic_rows_out_by_default(ds: LeRobotDataset, tmp_path: Path) -> None:
    recipe = load_recipe("subtask")
    default = export_samples(ds, recipe, tmp_path / "default", keep_untargeted=True)
    episodes = {json.loads(line)["metadata"]["episode_index"]
                for line in (tmp_path / "default" / "samples.jsonl").read_text().splitlines()}
    assert episodes == {0, 2} and default.heuristic == {NO_VIDEO: ["subtask"]}
    kept = export_samples(ds, recipe, tmp_path / "kept", keep_untargeted=True, heuristic_rows="keep")
    lines = [json.loads(line) for line in (tmp_path / "kept" / "samples.jsonl").read_text().splitlines()]
    assert NO_VIDEO in {r["metadata"]["episode_index"] for r in lines} and kept.heuristic == {}
    assert kept.samples > default.samples


def test_motion_rows_are_measured_not_stand_ins_and_export_by_default(ds: LeRobotDataset, tmp_path: Path) -> None:
    """The motion style is heuristic on every episode (only a rule writes it), yet no model's text is replaced."""
    assert "motion" in read_provenance(ds.root, ds.info).heuristic_styles(0)
    assert read_provenance(ds.root, ds.info).stand_in_styles(NO_VIDEO) == {"subtask", "plan", "memory"}
    report = export_samples(ds, load_recipe("motion"), tmp_path / "motion")
    assert report.samples > 0 and all("motion" not in styles for styles in report.heuristic.values())


def test_the_cli_says_what_it_left_out_and_keeps_it_with_the_flag(ds: LeRobotDataset, tmp_path: Path) -> None:
    code, out, err = _cli("export", str(ds.root), "--recipe", "subtask", "--out", str(tmp_path / "a"))
    assert code == 0, err
    assert "heuristic rows left out: subtask of episode(s) 1 (--heuristic_rows keep exports them)" in out
    code, out, err = _cli("export", str(ds.root), "--recipe", "subtask", "--out", str(tmp_path / "b"),
                          "--heuristic_rows", "keep")
    assert code == 0 and "heuristic" not in out, out + err
    code, _, err = _cli("export", str(ds.root), "--recipe", "subtask", "--out", str(tmp_path / "c"),
                        "--heuristic_rows", "maybe")
    assert code == 2 and "--heuristic_rows: Input should be 'drop' or 'keep'" in err and "Traceback" not in err


def test_render_keeps_them_by_default_and_drops_them_with_the_flag(ds: LeRobotDataset) -> None:
    def targets(*flags: str) -> tuple[int, str]:
        code, out, err = _cli("render", str(ds.root), "--recipe", "subtask", "--episode", str(NO_VIDEO), "--json",
                              *flags)
        assert code == 0, err
        return sum(1 for line in out.splitlines() if json.loads(line)["messages"]), err

    rendered, err = targets()
    assert rendered > 0 and "heuristic_left_out" not in err
    rendered, err = targets("--heuristic_rows", "drop")
    assert rendered == 0 and json.loads(err)["heuristic_left_out"] == {str(NO_VIDEO): ["subtask"]}


def test_a_persons_edit_makes_the_rows_theirs(ds: LeRobotDataset) -> None:
    rows = episode_rows(ds, NO_VIDEO)
    persistent = [{**r, "content": "reach for the cube"} if r.get("style") == "subtask" else r for r in rows.persistent]
    save_episode(ds, NO_VIDEO, persistent, None)
    provenance = read_provenance(ds.root, ds.info)
    assert "subtask" not in provenance.heuristic_styles(NO_VIDEO)
    assert provenance.producer("subtask", NO_VIDEO) == "heuristic:motion"  # who wrote it first stays recorded


def test_a_rewrite_moves_an_episode_between_producers() -> None:
    block = {"episodes": {"subtask": {"heuristic:motion": "1", MODEL: "0,2"}, "memory": {MODEL: "0-2"}}}
    # Episode 1 redone by the model (its memory rows replaced by none); episode 2's memory kept.
    after = with_episode_producers(block, {1: {"subtask": MODEL}}, {1: frozenset({"subtask", "memory"})})
    assert after["episodes"] == {"memory": {MODEL: "0,2"}, "subtask": {MODEL: "0-2"}}
    everything = with_episode_producers(after, {}, {0: None, 1: None, 2: None})
    assert "episodes" not in everything
    # An episode without a per-episode record falls back to the dataset-level producer.
    legacy = Provenance.of({"producers": {"subtask": "heuristic:motion"}, "human": {"subtask": [3]}})
    assert legacy.heuristic_styles(0) == {"subtask"} and legacy.heuristic_styles(3) == frozenset()


def test_restore_brings_the_per_episode_record_back(annotated: tuple[Path, Any], tmp_path: Path) -> None:
    """A dataset LeRobot's tools wrote anew has no provenance file; `restore` copies it back per episode."""
    source = annotated[0]
    copy = shutil.copytree(source, tmp_path / "copy")
    (copy / PROVENANCE).unlink()
    code, out, err = _cli("restore", str(copy), "--from", str(source))
    assert code == 0, err
    restored = json.loads((copy / PROVENANCE).read_text())
    assert restored["episodes"] == json.loads((source / PROVENANCE).read_text())["episodes"]
    assert "subtask" in read_provenance(copy, LeRobotDataset(copy).info).heuristic_styles(NO_VIDEO)
    # LeRobot renumbers episodes: the records follow each episode to its new index.
    renumbered = shutil.copytree(source, tmp_path / "renumbered")
    (renumbered / PROVENANCE).unlink()
    restore_info(LeRobotDataset(renumbered), [LeRobotDataset(source)], EpisodeMatch({0: (0, 1), 1: (0, 0), 2: (0, 2)}))
    assert json.loads((renumbered / PROVENANCE).read_text())["episodes"]["subtask"] == {
        "heuristic:motion": "0", MODEL: "1-2"}
