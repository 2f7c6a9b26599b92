"""The no-model annotator with and without names from the task (issue 39), measured two ways.

1. The task grammar on real task strings (`tests/fixtures/task_strings.json`: Meta-World, LIBERO,
   LeRobot's datasets and docs): how many parse into exactly the steps a person reads.
2. `steerable eval` figures of `steerable annotate` (no VLM) on simulated datasets of each difficulty,
   with `--motion.name_from_task` true (the default) and false, same episodes: segment F1 at IoU 0.5,
   boundary F1, edit score, end-to-end F1 (a span counts only with its label), label accuracy, and
   how many episodes the run named. Spans are the same both ways; labels are what names change.

    .venv/bin/python benchmarks/task_names.py [--episodes 50] [--levels easy realistic hard]

The policy-scored figure (what a policy trained on these annotations does) is `benchmarks/policy_sim.py
--parts language`. Ends with a RESULT line.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from steerable.annotate.config import AnnotateConfig
from steerable.annotate.run import annotate
from steerable.eval.labels import make_label_matcher
from steerable.eval.runs import evaluate_dataset
from steerable.language.task_steps import parse_task
from steerable.synthetic import generate_synthetic

FIXTURE = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "task_strings.json"
METRICS = (("seg_f1_50", "seg F1@0.5"), ("boundary_f1", "boundary F1"), ("edit", "edit"), ("e2e_f1", "e2e F1"),
           ("label_accuracy", "label acc"))


def real_strings() -> tuple[int, int, int, int]:
    """(parsed right, total, parsed right not from Meta-World, total not from Meta-World)."""
    entries = json.loads(FIXTURE.read_text())
    right = [[s.text for s in parse_task(e["task"])] == e["steps"] for e in entries]
    other = [not e["source"].lower().startswith("meta-world") for e in entries]
    return sum(right), len(entries), sum(r for r, o in zip(right, other, strict=True) if o), sum(other)


def level_row(work: Path, level: str, episodes: int) -> dict[str, dict[str, float]]:
    root = work / f"data_{level}"
    generate_synthetic(root, episodes=episodes, cameras=("top",), seed=0, difficulty=level)
    out: dict[str, dict[str, float]] = {}
    for named in (False, True):
        target = work / f"annotated_{level}_{'named' if named else 'unnamed'}"
        started = time.perf_counter()
        summary = annotate(AnnotateConfig(root=root, output_dir=target, executor={"progress": False},
                                          motion={"name_from_task": named}))
        seconds = time.perf_counter() - started
        metrics = evaluate_dataset(target, make_label_matcher("normalized"), resamples=0).report.metrics
        count = next((n for n in summary.notes if "named from the task" in n), "")
        out["named" if named else "unnamed"] = {
            **{k: float(metrics[k]) for k, _ in METRICS},
            "named_episodes": float(count.split("(")[-1].split(" ")[0]) if count else 0.0,
            "seconds": seconds,
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=50)
    parser.add_argument("--levels", nargs="+", default=["easy", "realistic", "hard"])
    args = parser.parse_args()
    right, total, right_other, other = real_strings()
    print(f"real task strings parsed into the steps a person reads: {right}/{total} "
          f"({right_other}/{other} not from Meta-World)")
    result = {"real_parsed": right, "real_total": total}
    print(f"| level ({args.episodes} episodes) | names | {' | '.join(label for _, label in METRICS)} | "
          f"episodes named | annotate s |")
    print("|---|---|" + "---|" * (len(METRICS) + 2))
    with tempfile.TemporaryDirectory() as tmp:
        for level in args.levels:
            row = level_row(Path(tmp), level, args.episodes)
            for names, m in row.items():
                cells = " | ".join(f"{m[k]:.3f}" for k, _ in METRICS)
                print(f"| {level} | {names} | {cells} | {int(m['named_episodes'])} | {m['seconds']:.1f} |", flush=True)
                result[f"{level}_{names}_e2e_f1"] = round(m["e2e_f1"], 3)
                result[f"{level}_{names}_seg_f1"] = round(m["seg_f1_50"], 3)
    print("RESULT " + " ".join(f"{k}={v}" for k, v in result.items()))


if __name__ == "__main__":
    main()
