"""`steerable render` and `steerable recipes` from the command line (eval: test_eval_cli.py, demo: test_demo.py)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from annotate_helpers import steerable
from steerable.dataset import open_dataset
from steerable.language import rows_from_arrow
from steerable.recipes import load_recipe
from steerable.recipes.render import RenderOptions, render_sample_reference
from train_data import annotate_synthetic


@pytest.fixture(scope="module")
def annotated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return annotate_synthetic(tmp_path_factory.mktemp("render") / "ds", episodes=2).root


def _lines(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def test_all_json_is_one_line_per_frame_with_the_documented_keys(annotated: Path) -> None:
    result = steerable("render", str(annotated), "--recipe", "subtask_mem_vqa_speech", "--all", "--json")
    assert result.returncode == 0, result.stderr
    lines = _lines(result.stdout)
    ds = open_dataset(annotated)
    assert len(lines) == ds.total_frames
    assert [x["index"] for x in lines] == list(range(ds.total_frames))
    keys = {"index", "episode_index", "frame_index", "messages", "message_streams", "target_message_indices"}
    assert all(set(x) == keys for x in lines)
    rendered = [x for x in lines if x["messages"] is not None]
    assert rendered and len(rendered) < len(lines)  # without --fallback some frames render nothing
    stats = json.loads(result.stderr.strip().splitlines()[-1])["stats"]
    assert stats["frames"] == ds.total_frames
    # VQA frames always train VQA (routed components), whatever the draw.
    vqa = [x for x in rendered if any(m.get("content") == '{"count": 1}' for m in x["messages"])]
    assert len(vqa) == 2


def test_compat_lerobot_equals_the_reference_render_frame_for_frame(annotated: Path) -> None:
    recipe_name = "subtask_mem_vqa_speech"
    result = steerable("render", str(annotated), "--recipe", recipe_name, "--all", "--json", "--compat", "lerobot")
    assert result.returncode == 0, result.stderr
    lines = _lines(result.stdout)
    recipe = load_recipe(recipe_name)
    ds = open_dataset(annotated)
    expected = []
    for path in sorted((annotated / "data").rglob("*.parquet")):
        table = pq.read_table(path)
        persistent = rows_from_arrow(table.column("language_persistent"))
        events = rows_from_arrow(table.column("language_events"))
        for i in range(table.num_rows):
            sample = render_sample_reference(
                recipe,
                persistent=persistent[i],
                events=events[i],
                t=table.column("timestamp")[i].as_py(),
                sample_idx=table.column("index")[i].as_py(),
                task=ds.tasks[table.column("task_index")[i].as_py()],
                options=RenderOptions(compat="lerobot"),
            )
            expected.append(None if sample is None else sample.to_dict()["messages"])
    assert [x["messages"] for x in lines] == expected


def test_fallback_task_fills_every_frame(annotated: Path) -> None:
    result = steerable("render", str(annotated), "--recipe", "subtask", "--all", "--json", "--fallback", "task")
    assert result.returncode == 0, result.stderr
    assert all(x["messages"] for x in _lines(result.stdout))


def test_one_frame_human_view_and_camera_map(annotated: Path) -> None:
    result = steerable(
        "render", str(annotated), "--recipe", "hirobot", "--episode", "1", "--frame", "3",
        "--camera_map", "top=observation.images.top",
    )
    assert result.returncode == 0, result.stderr
    assert "episode 1 frame 3" in result.stdout and "component" in result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--recipe", "nope"], "no built-in recipe named 'nope'"),
        (["--recipe", "subtask", "--camera_map", "oops"], "RECIPE_KEY=DATASET_KEY"),
        (["--recipe", "subtask", "--frame", "2"], "--frame needs --episode"),
        (["--recipe", "subtask", "--episode", "9"], "episode 9 is not in"),
        (["--recipe", "hirobot", "--camera_map", "top=observation.images.side"], "observation.images.side"),
    ],
)
def test_bad_render_input(annotated: Path, args: list[str], message: str) -> None:
    result = steerable("render", str(annotated), *args)
    assert result.returncode == 2, result.stdout
    assert message in result.stderr and "Traceback" not in result.stderr


def test_recipe_errors_name_file_line_and_key(tmp_path: Path, annotated: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("messages:\n  - role: user\n    content: ${task}\n    stream: low_level\n    targt: true\n")
    result = steerable("recipes", "lint", str(bad))
    assert result.returncode == 2
    assert "bad.yaml:5" in result.stderr and "targt" in result.stderr and "target" in result.stderr


def test_lint_against_a_dataset_warns_about_bindings_that_never_resolve(annotated: Path, tmp_path: Path) -> None:
    ok = steerable("recipes", "lint", "subtask_mem", "--dataset", str(annotated))
    assert ok.returncode == 0 and "valid for" in ok.stdout
    motion = steerable("recipes", "lint", "motion", "--dataset", str(annotated))
    assert "'motion'" in motion.stdout or "style=motion" in motion.stdout  # no motion rows in this dataset
    # A binding read only by `if_absent` that matches nothing just never leaves a turn out: no warning.
    guarded = tmp_path / "guarded.yaml"
    guarded.write_text("bindings:\n  traced: last_emitted(t, style=trace)\nmessages:\n"
                       "  - {role: user, content: '${task}', stream: high_level}\n"
                       "  - {role: assistant, content: '${subtask}', stream: high_level, target: true,"
                       " if_absent: traced}\n")
    corrections = steerable("recipes", "lint", str(guarded), "--dataset", str(annotated))
    assert corrections.returncode == 0 and "warning" not in corrections.stdout, corrections.stdout
    guarded.write_text(guarded.read_text().replace("${subtask}", "${traced}"))
    assert "'traced'" in steerable("recipes", "lint", str(guarded), "--dataset", str(annotated)).stdout
    listed = steerable("recipes", "list")
    assert listed.returncode == 0 and "hirobot" in listed.stdout and "subtask_mem_vqa_speech" in listed.stdout


def test_camera_map_accepts_both_key_forms_and_ignores_cameras_a_recipe_does_not_use(annotated: Path) -> None:
    base = ["render", str(annotated), "--episode", "0", "--json"]
    outputs = []
    for pair in ("top=observation.images.wrist", "observation.images.top=wrist"):  # short and full, both sides
        result = steerable(*base, "--recipe", "hirobot", "--camera_map", pair)
        assert result.returncode == 0, result.stderr
        outputs.append(result.stdout)
    assert outputs[0] == outputs[1] and "observation.images.wrist" in outputs[0]
    # One command line serves every recipe: subtask reads no camera, so the mapping is only a warning
    # (every built-in with it: tests/test_recipes_model.py).
    line = ["--camera_map", "top=observation.images.top", "--camera_map", "wrist=observation.images.wrist"]
    result = steerable(*base, "--recipe", "subtask", *line)
    assert result.returncode == 0, result.stderr
    assert "camera_map names 'top', 'wrist', which this recipe does not use" in result.stderr


def test_lint_warns_on_a_camera_mismatch_and_fails_only_when_nothing_renders(annotated: Path, so101: Path) -> None:
    mismatch = steerable("recipes", "lint", "hirobot", "--dataset", str(annotated),
                         "--camera_map", "top=observation.images.front")
    assert mismatch.returncode == 0, mismatch.stdout + mismatch.stderr
    assert "warning: recipe cameras ['observation.images.front']" in mismatch.stdout
    assert "--camera_map top=" in mismatch.stdout and "valid for" in mismatch.stdout
    nothing = steerable("recipes", "lint", "motion", "--dataset", str(so101))
    assert nothing.returncode == 1 and "renders no sample" in nothing.stdout
    joint = steerable("recipes", "lint", "subtask_joint", "--dataset", str(so101))  # ${task} low_level renders
    assert joint.returncode == 0 and "no language columns" in joint.stdout


@pytest.fixture(scope="module")
def one_camera(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    """A one-camera dataset (`top`) with VQA pairs on three frames of each episode; and their count."""
    from steerable.dataset.writer import EpisodeLanguage, write_language
    from steerable.synthetic import generate_synthetic

    root = generate_synthetic(tmp_path_factory.mktemp("one") / "ds", episodes=2, cameras=("top",), seed=1)
    ds = open_dataset(root)
    top = "observation.images.top"
    updates = {}
    for e in range(2):
        ts = [float(t) for t in ds.episode_timestamps(e)]
        subtask = {"role": "assistant", "content": "reach", "style": "subtask", "timestamp": ts[0], "camera": None,
                   "tool_calls": None}
        pair = [{"role": role, "content": text, "style": "vqa", "camera": top, "tool_calls": None}
                for role, text in (("user", "how many cubes?"), ("assistant", '{"count": 1}'))]
        updates[e] = EpisodeLanguage([subtask], [(ts[k], r) for k in (5, 20, 40) for r in pair])
    write_language(ds, updates)
    return root, 6


def test_two_recipe_cameras_on_the_dataset_s_one_camera_render_once(one_camera: tuple[Path, int]) -> None:
    """Both VQA cameras of a built-in bound to the one camera: its VQA components become the same
    component, which renders once (taking both weights), not twice under two names."""
    root, vqa_frames = one_camera
    recipe = load_recipe("subtask_mem_vqa_speech", camera_map={"wrist": "observation.images.top"})
    routed = {n: c.weight for n, c in recipe.components() if c.route == "vqa"}
    assert list(routed) == ["ask_vqa_top"] and routed["ask_vqa_top"] == pytest.approx(0.15)
    assert sum(c.weight or 0 for _, c in recipe.components()) == pytest.approx(1.0)
    for compat in ("steerable", "lerobot"):
        result = steerable("render", str(root), "--recipe", "subtask_mem_vqa_speech", "--all", "--json",
                           "--camera_map", "top=top", "--camera_map", "wrist=top", "--compat", compat)
        assert result.returncode == 0, result.stderr
        stats = json.loads(result.stderr.strip().splitlines()[-1])["stats"]["components"]
        assert "ask_vqa_wrist" not in stats and stats["ask_vqa_top"]["rendered"] == vqa_frames
        answers = [x for x in _lines(result.stdout) if any(m.get("content") == '{"count": 1}'
                                                           for m in x["messages"] or ())]
        assert len(answers) == vqa_frames
    # Two distinct cameras keep their own components.
    two = load_recipe("subtask_mem_vqa_speech", camera_map={"wrist": "observation.images.front"})
    assert [n for n, c in two.components() if c.route == "vqa"] == ["ask_vqa_top", "ask_vqa_wrist"]


def test_render_imports_only_what_the_command_uses(annotated: Path) -> None:
    """`render --json` starts without pandas (pyarrow.dataset pulls it in), rich, or the modules of
    the other commands (annotate's flags build on pydantic settings, demo and recipes on rich)."""
    code = ("import json, os, sys\nfrom steerable.cli.main import main\nsys.stdout = open(os.devnull, 'w')\n"
            "status = main(sys.argv[1:])\nsys.stdout = sys.__stdout__\nprint(status, json.dumps(sorted(sys.modules)))")
    result = subprocess.run([sys.executable, "-c", code, "render", str(annotated), "--recipe",
                             "subtask_mem_vqa_speech", "--all", "--json"], capture_output=True, text=True, timeout=300)
    status, modules = result.stdout.strip().splitlines()[-1].split(" ", 1)
    loaded = set(json.loads(modules))
    assert status == "0", result.stderr
    assert not {"pandas", "pyarrow.dataset", "rich"} & loaded
    commands = {m for m in loaded if m.startswith("steerable.cli.") and not m.startswith("steerable.cli._")}
    shared = {"steerable.cli.main", "steerable.cli.errors", "steerable.cli.flags", "steerable.cli.options"}
    assert commands == shared | {"steerable.cli.render"}


def test_an_episode_sharing_its_row_group_renders_the_same(annotated: Path, tmp_path: Path) -> None:
    """The persistent list is read from one row where a row group holds one episode (LeRobot's
    layout); a file written as a single row group reads it the long way, with the same samples."""
    copy = tmp_path / "one_group"
    shutil.copytree(annotated, copy)
    for path in sorted((copy / "data").rglob("*.parquet")):
        table = pq.read_table(path)
        pq.write_table(table, path, row_group_size=table.num_rows + 1)
        assert pq.ParquetFile(path).metadata.num_row_groups == 1
    args = ("--recipe", "hirobot", "--all", "--json")
    grouped, shared = steerable("render", str(annotated), *args), steerable("render", str(copy), *args)
    assert grouped.returncode == shared.returncode == 0, shared.stderr
    assert grouped.stdout == shared.stdout and _lines(grouped.stdout)
