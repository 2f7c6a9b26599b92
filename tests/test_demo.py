"""`steerable demo` (what `make demo` runs): the whole loop, ending with the eval table and a viewer snapshot."""

from __future__ import annotations

import json
import re
from pathlib import Path

from annotate_helpers import steerable


def test_demo_runs_the_whole_loop_and_ends_with_the_eval_table(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    result = steerable("demo", "--out", str(out), "--episodes", "3", "--viewer_episodes", "2")
    assert result.returncode == 0, result.stderr
    text = result.stdout
    assert "(realistic)" in text and "heuristic" in text and "frames rendered" in text
    index = out.resolve() / "viewer" / "index.html"
    assert f"   {index}" in text and index.is_file()
    assert (out / "viewer" / "data" / "episode_000001.js").is_file()
    assert not (out / "viewer" / "data" / "episode_000002.js").exists()  # only --viewer_episodes
    evaluation = text[text.index("5. evaluate") :]
    assert "segment F1 @IoU 0.5" in evaluation and "end-to-end F1" in evaluation and "95% CI" in evaluation
    found = re.search(r"segmentation F1 (\d\.\d{3})", evaluation)
    assert found, evaluation
    printed = float(found.group(1))
    ev = steerable("eval", str(out / "dataset"), "--json", "--labels", "normalized")
    report = json.loads(ev.stdout)
    assert report["episodes"] == 3 and report["gold_kind"] == "ground_truth"
    assert printed == round(report["metrics"]["seg_f1_50"], 3) and printed > 0.3
    assert report["gripper_events"]["recall"] >= 0.8
    # Without a model, the subtasks name what the task names, with a plan and a memory (issue 39):
    # their labels match the ground truth's, not only their spans.
    assert re.search(r"rows: memory \d+, motion \d+, plan \d+, subtask \d+", text), text
    assert report["metrics"]["e2e_f1"] >= 0.8
    # What the figure measures is said, and the same annotator's score on `hard` stands beside it.
    assert "this generator's own nuisances" in evaluation and "(part k of n)" in evaluation
    beside = re.search(r"on hard \(same seeds\): segmentation F1 (\d\.\d{3})", evaluation)
    assert beside, evaluation
    hard = json.loads(steerable("eval", str(out / "dataset_hard"), "--json", "--labels", "normalized").stdout)
    assert hard["episodes"] == 3 and float(beside.group(1)) == round(hard["metrics"]["seg_f1_50"], 3)
    e2e = re.search(r"on hard \(same seeds\): .*end-to-end F1 (\d\.\d{3})", evaluation)
    assert e2e and float(e2e.group(1)) == round(hard["metrics"]["e2e_f1"], 3), evaluation

    again = steerable("demo", "--out", str(out), "--episodes", "2", "--viewer_episodes", "1", "--difficulty", "easy")
    assert again.returncode == 0, again.stderr  # an earlier demo's dataset and snapshot are replaced
    assert not (out / "viewer" / "data" / "episode_000001.js").exists()
