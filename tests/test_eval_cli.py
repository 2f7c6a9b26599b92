"""`steerable eval` from the command line: synthetic truth, --gold JSON/JSONL/dataset, --compare, --json, --plot."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from annotate_helpers import steerable
from steerable.annotate.config import AnnotateConfig
from steerable.annotate.run import annotate
from steerable.dataset import open_dataset
from steerable.eval.gold import dataset_segments
from steerable.synthetic import generate_synthetic, read_ground_truth
from train_data import annotate_synthetic

EPISODES = 3


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Run A: the motion annotator; run B: uniform thirds. Same seed, so the same episodes and truth."""
    base = tmp_path_factory.mktemp("eval")
    a = base / "a"
    generate_synthetic(a, episodes=EPISODES, cameras=("top", "wrist"), seed=0)
    annotate(AnnotateConfig(root=a, executor={"progress": False}))
    b = annotate_synthetic(base / "b", episodes=EPISODES).root
    return a, b


def _json(*args: str) -> dict:
    labels = () if "--labels" in args else ("--labels", "normalized")
    result = steerable("eval", *args, "--json", *labels, "--resamples", "200")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def _user_error(*args: str) -> str:
    labels = () if "--labels" in args else ("--labels", "normalized")
    result = steerable("eval", *args, *labels)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_synthetic_truth_is_the_default_gold_and_the_json_has_the_documented_shape(runs) -> None:
    a, _ = runs
    report = _json(str(a))
    assert report["gold_kind"] == "ground_truth" and report["episodes"] == EPISODES
    assert report["label_matcher"].startswith("normalized")
    metrics = report["metrics"]
    assert set(metrics) == set(report["ci95"]) >= {
        "seg_f1_25", "seg_f1_50", "seg_f1_75", "boundary_f1", "boundary_error_s", "over_segmentation",
        "edit", "f1_10", "f1_25", "f1_50", "e2e_f1", "label_accuracy",
    }
    assert metrics["seg_f1_50"] >= 0.8 and report["gripper_events"]["recall"] >= 0.9
    assert [e["episode_index"] for e in report["per_episode"]] == list(range(EPISODES))
    assert all({"n_pred", "n_gold", "seg_f1_50", "e2e_f1"} <= set(e) for e in report["per_episode"])
    lo, hi = report["ci95"]["seg_f1_50"]
    assert lo <= metrics["seg_f1_50"] <= hi
    table = steerable("eval", str(a), "--labels", "normalized", "--resamples", "100")
    assert table.returncode == 0, table.stderr
    assert "segment F1 @IoU 0.5" in table.stdout and "labels matched by normalized" in table.stdout
    assert "F1@50" in table.stdout and "gripper events" in table.stdout


def test_gold_json_equal_to_the_predictions_scores_one(runs, tmp_path: Path) -> None:
    a, _ = runs
    predicted, _ = dataset_segments(open_dataset(a))
    rows = [
        {"episode_index": e, "instruction": "x",
         "segments": [{"start_sec": s.start, "end_sec": s.end, "subtask": s.label} for s in segs]}
        for e, segs in predicted.items()
    ]
    gold = tmp_path / "gold.json"
    gold.write_text(json.dumps(rows))
    report = _json(str(a), "--gold", str(gold), "--labels", "exact")
    assert report["gold_kind"] == "file" and report["label_matcher"] == "exact text"
    assert all(v == 1.0 for k, v in report["metrics"].items() if k != "boundary_error_s"), report["metrics"]
    assert report["metrics"]["boundary_error_s"] == 0.0


def test_gold_jsonl_with_missing_and_extra_episodes(runs, tmp_path: Path) -> None:
    a, _ = runs
    truth = read_ground_truth(a)
    lines = [
        json.dumps({"video": f"episode_{e:06d}.mp4", "instruction": truth[e].task,
                    "segments": [{"start_sec": s.start, "end_sec": s.end, "subtask": s.text}
                                 for s in truth[e].subtasks]})
        for e in (0, 1)
    ]
    lines.append(json.dumps({"episode_index": 99, "segments": [{"start_sec": 0, "end_sec": 1, "subtask": "x"}]}))
    gold = tmp_path / "gold.jsonl"
    gold.write_text("\n".join(lines) + "\n")
    report = _json(str(a), "--gold", str(gold))
    assert report["episodes"] == 2
    assert report["coverage"]["gold_episodes_without_predictions"] == [99]
    assert report["coverage"]["predicted_episodes_without_gold"] == [2]
    assert "gripper_events" not in report  # only with the synthetic truth
    gold.write_text(lines[0] + "\n" + '{"episode_index": 1, "segments": [{"start_sec": 0}]}\n')
    assert _user_error(str(a), "--gold", str(gold)).endswith(
        "gold.jsonl:2: segments[0] needs numeric start_sec and end_sec")
    gold.write_text(json.dumps({"episode_index": 50, "segments": []}) + "\n")
    assert "no episode has both predictions and gold" in _user_error(str(a), "--gold", str(gold))


def test_another_annotated_dataset_as_gold(runs) -> None:
    a, b = runs
    self_score = _json(str(a), "--gold", str(a), "--labels", "exact")
    assert self_score["gold_kind"] == "dataset" and self_score["metrics"]["e2e_f1"] == 1.0
    other = _json(str(b), "--gold", str(a))
    assert other["episodes"] == EPISODES and other["metrics"]["seg_f1_50"] < 1.0
    assert other["metrics"]["e2e_f1"] == 0.0  # "reach the cube 0" never says what the motion rows say


def test_compare_two_runs_with_paired_bootstrap(runs, tmp_path: Path) -> None:
    a, b = runs
    report = _json("--compare", str(a), str(b))
    assert report["episodes"] == EPISODES and report["bootstrap_resamples"] == 200
    assert report["a"]["dataset"] == str(a) and report["b"]["dataset"] == str(b)
    diff = report["diff_b_minus_a"]["seg_f1_50"]
    assert diff == pytest.approx(report["b"]["metrics"]["seg_f1_50"] - report["a"]["metrics"]["seg_f1_50"], abs=1e-3)
    assert diff < 0  # uniform thirds segment worse than the gripper-event annotator
    lo, hi = report["diff_ci95"]["seg_f1_50"]
    assert lo <= diff <= hi and report["p_b_better"]["seg_f1_50"] < 0.5
    table = steerable("eval", "--compare", str(a), str(b), "--labels", "normalized", "--resamples", "100")
    assert table.returncode == 0, table.stderr
    assert "P(B better)" in table.stdout and "paired bootstrap" in table.stdout
    # DATASET beside --compare names the synthetic dataset whose truth is the gold (here B's: the same truth)
    same = _json(str(b), "--compare", str(a), str(b))
    assert same["gold"] == f"{b} (synthetic ground truth)" and same["diff_b_minus_a"] == report["diff_b_minus_a"]
    truth = read_ground_truth(a)
    gold = tmp_path / "gold.json"
    gold.write_text(json.dumps([
        {"episode_index": e,
         "segments": [{"start_sec": s.start, "end_sec": s.end, "subtask": s.text} for s in truth[e].subtasks]}
        for e in (0, 1, 7) if e in truth
    ] + [{"episode_index": 7, "segments": [{"start_sec": 0, "end_sec": 1, "subtask": "x"}]}]))
    partial = _json("--compare", str(a), str(b), "--gold", str(gold))
    assert partial["episodes"] == 2 and partial["not_scored"] == [2, 7] and partial["gold_kind"] == "file"


def test_plot_writes_a_png_for_a_run_and_a_comparison(runs, tmp_path: Path) -> None:
    a, b = runs
    for name, args in (("one.png", [str(a)]), ("two.png", ["--compare", str(a), str(b)])):
        out = tmp_path / "plots" / name
        result = steerable("eval", *args, "--plot", str(out), "--labels", "normalized", "--resamples", "100")
        assert result.returncode == 0, result.stderr
        data = out.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000
        assert f"plot: {out}" in result.stdout


def test_bad_invocations_are_one_line_errors(runs, tmp_path: Path, lingzu: Path) -> None:
    a, b = runs
    assert "give DATASET to score, or --compare" in _user_error()
    assert "does not exist" in _user_error(str(a), "--gold", str(tmp_path / "nope.jsonl"))
    assert "no ground truth" in _user_error(lingzu)
    assert "no language rows" in _user_error(str(lingzu), "--gold", str(a))
    assert "is not a folder" in _user_error(str(a), "--labels", "embedding", "--embed_model", str(tmp_path / "none"))
    assert "must not be negative" in _user_error(str(a), "--resamples", "-1")


def test_embedding_label_matcher_accepts_paraphrases(runs, tmp_path: Path) -> None:
    a, _ = runs
    predicted, _ = dataset_segments(open_dataset(a))

    def paraphrase(label: str) -> str:  # "pick up the red cube" -> "pick the red cube up"; place -> put
        if label.startswith("pick up "):
            return f"pick {label[len('pick up '):]} up"
        return "put " + label[len("place "):] if label.startswith("place ") else label

    rows = [
        {"episode_index": e,
         "segments": [{"start_sec": s.start, "end_sec": s.end, "subtask": paraphrase(s.label)} for s in segs]}
        for e, segs in predicted.items()
    ]
    gold = tmp_path / "paraphrased.json"
    gold.write_text(json.dumps(rows))
    assert _json(str(a), "--gold", str(gold))["metrics"]["e2e_f1"] == 0.0  # normalized text: no match
    result = steerable("eval", str(a), "--gold", str(gold), "--json", "--labels", "embedding", "--resamples", "0")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["label_matcher"].startswith("embedding cosine >= 0.85")
    assert report["metrics"]["e2e_f1"] == 1.0 and report["metrics"]["edit"] == 1.0
    assert "Loading weights" not in result.stderr
