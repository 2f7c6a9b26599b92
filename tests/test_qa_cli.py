"""What a new user hits on the command line: typos in flags, bad paths, closed pipes."""

from __future__ import annotations

from pathlib import Path

from annotate_helpers import steerable


def test_a_typo_in_a_flag_names_the_command_and_the_flag_meant(tmp_path: Path) -> None:
    made = steerable("make-dataset", "synthetic", "--out", str(tmp_path / "x"), "--episodse", "2")
    assert made.returncode == 2
    assert made.stderr.strip() == "steerable: error: unknown option --episodse (did you mean --episodes?)", made.stderr
    assert not (tmp_path / "x").exists()
    # A flag the command lacks is not "corrected" to an unrelated one.
    info = steerable("info", str(tmp_path), "--episodes", "2")
    assert info.returncode == 2
    last = info.stderr.strip().splitlines()[-1]
    assert last == "steerable: error: unknown option --episodes (see --help for every option)", last


def test_eval_of_a_dataset_without_motion_rows_scores_no_gripper_events(tmp_path: Path) -> None:
    """Oracle language has no motion rows: there is nothing to score, not a gripper F1 of 0."""
    import json

    from steerable.synthetic import generate_synthetic

    root = generate_synthetic(tmp_path / "oracle", episodes=2, cameras=("top",), seed=2, with_language=True)
    # --labels normalized: the oracle's labels are the gold's, and the embedding model costs 5 s a run.
    scored = steerable("eval", str(root), "--json", "--labels", "normalized")
    assert scored.returncode == 0, scored.stderr
    report = json.loads(scored.stdout)
    assert report["metrics"]["seg_f1_50"] == 1.0
    assert "gripper_events" not in report
    table = steerable("eval", str(root), "--labels", "normalized")
    assert table.returncode == 0 and "gripper events" not in table.stdout


def test_annotate_refuses_an_output_dir_inside_the_dataset(tmp_path: Path) -> None:
    """The copy would be built inside the tree it copies, leaving the source changed."""
    from annotate_helpers import file_hashes, make_synthetic

    root = make_synthetic(tmp_path / "ds", episodes=1)
    before = file_hashes(root, skip_work_dir=False)
    run = steerable("annotate", str(root), "--output_dir", str(root / "annotated"))
    assert run.returncode == 2, run.stderr
    last = run.stderr.strip().splitlines()[-1]
    assert last.startswith("steerable: error: --output_dir") and "inside" in last, last
    assert file_hashes(root, skip_work_dir=False) == before
    assert sorted(p.name for p in root.iterdir()) == ["data", "meta", "videos"]


def test_annotate_takes_episode_ranges_like_every_command(tmp_path: Path) -> None:
    from annotate_helpers import make_synthetic, summary_of

    root = make_synthetic(tmp_path / "ds", episodes=3)
    out = tmp_path / "out"
    run = steerable("annotate", str(root), "--output_dir", str(out), "--episodes", "1-2")
    assert run.returncode == 0, run.stderr
    assert summary_of(out)["episodes_selected"] == 2
    bad = steerable("annotate", str(root), "--output_dir", str(out), "--episodes=1-x")
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines()[-1] == (
        "steerable: error: --episodes takes episode indices and ranges like 0,3,7-9, got '1-x'"
    )


def test_info_prints_task_text_with_brackets_verbatim(tmp_path: Path) -> None:
    """Dataset text is data, not terminal markup: '[red]' is shown, '[/x]' does not crash."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from annotate_helpers import make_synthetic

    root = make_synthetic(tmp_path / "ds [v2]", episodes=1)
    table = pq.read_table(root / "meta" / "tasks.parquet")
    task = "pick the [red] cube [/x] now"
    table = table.set_column(table.schema.names.index("task"), "task", pa.array([task]))
    pq.write_table(table, root / "meta" / "tasks.parquet")
    shown = steerable("info", str(root))
    assert shown.returncode == 0, shown.stderr
    assert f"  - {task}" in shown.stdout
    assert str(root) in shown.stdout


def test_eval_prints_a_dataset_path_with_brackets_verbatim(tmp_path: Path) -> None:
    from steerable.synthetic import generate_synthetic

    root = generate_synthetic(tmp_path / "run [v2]", episodes=1, cameras=("top",), seed=2, with_language=True)
    shown = steerable("eval", str(root), "--labels", "normalized")
    assert shown.returncode == 0, shown.stderr
    assert f"dataset: {root}" in shown.stdout


def test_render_prints_streams_and_annotation_text_verbatim(tmp_path: Path) -> None:
    from steerable.dataset import open_dataset
    from steerable.dataset.writer import EpisodeLanguage, write_language
    from steerable.synthetic import generate_synthetic

    root = generate_synthetic(tmp_path / "ds", episodes=1, cameras=("top",), seed=2)
    row = {"role": "assistant", "content": "pick the [red] cube [/x]", "style": "subtask", "timestamp": 0.0,
           "camera": None, "tool_calls": None}  # fmt: skip
    write_language(open_dataset(root), {0: EpisodeLanguage(persistent=[row])})
    shown = steerable("render", str(root), "--recipe", "subtask", "--episode", "0", "--frame", "0")
    assert shown.returncode == 0, shown.stderr
    assert "pick the [red] cube [/x]" in shown.stdout
    assert "[low_level]" in shown.stdout or "[high_level" in shown.stdout


def test_recipes_lint_prints_a_path_with_brackets_verbatim(tmp_path: Path) -> None:
    import shutil

    from annotate_helpers import REPO
    from steerable.synthetic import generate_synthetic

    root = generate_synthetic(tmp_path / "ds", episodes=1, cameras=("top",), seed=2, with_language=True)
    folder = tmp_path / "r [x]"
    folder.mkdir()
    shutil.copy(REPO / "src/steerable/recipes/builtin/subtask.yaml", folder / "my.yaml")
    linted = steerable("recipes", "lint", str(folder / "my.yaml"), "--dataset", str(root))
    assert "r [x]/my.yaml" in linted.stdout, linted.stdout + linted.stderr
