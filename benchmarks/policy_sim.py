"""The oracle-language experiment: a tiny policy trained on CPU on 60 simulated episodes.

1. `steerable make-dataset synthetic --episodes 60 --with_language --difficulty easy` (skipped when
   --dataset exists; `--difficulty` picks the task mix, which the evaluation then draws from);
2. `steerable train` with the default settings (skipped with --checkpoint), timed;
3. held-out subtask exact match (greedy) against the majority-class baseline (the most frequent
   subtask of the training episodes, predicted everywhere);
4. `steerable run --eval_episodes N` with the policy as the high level over the scripted controller,
   with and without `--eval_interjections`.

`--both_levels` (`--both_levels_only`: this part alone) adds the learned low level, with privileged
state: on an easy `--privileged_state` dataset it trains the policy (recipe `hierarchical`) and a
behaviour-cloning baseline without language (the plain task on the low-level stream) on the state
keys `observation.state,observation.environment_state`, same model and steps (`--both_train` adds
`steerable train` flags to both), then runs with `--observation privileged`: (a) scripted high /
policy low, (b) BC (none / policy), (c) policy / policy; and a pick test: the low level alone, asked
to pick up the first cube of the task (BC: given the task), grasps it within `--pick_seconds`.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/policy_sim.py --work /tmp/policy_sim
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/policy_sim.py --work /tmp/policy_sim --both_levels_only

Not part of `make test`: it trains for minutes.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

BC_RECIPE = """# Behaviour cloning without language: every frame is the plain task on the low-level stream.
description: Task-conditioned actions only (no subtasks, no text targets).
messages:
  - {role: user, content: "${task}", stream: low_level}
"""


PRIVILEGED_KEYS = "observation.state,observation.environment_state"


def _steerable(*args: str, timeout: float = 3600) -> str:
    cmd = [sys.executable, "-m", "steerable.cli.main", *args]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                            env={**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")})
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(args[:2])} failed:\n{result.stderr[-2000:]}")
    return result.stdout


def _train(dataset: Path, out: Path, *extra: str) -> float:
    if (out / "checkpoints" / "latest").is_file():
        return float("nan")  # already trained (resume would be a no-op)
    started = time.perf_counter()
    _steerable("train", "--dataset", str(dataset), "--output_dir", str(out), "--no_progress", *extra)
    return time.perf_counter() - started


def subtask_accuracy(dataset: Path, checkpoint: Path, max_cases: int) -> dict[str, Any]:
    from steerable.dataset import open_dataset
    from steerable.policy.checkpoint import latest_checkpoint, load_policy, read_training_state
    from steerable.policy.data import PolicyDataset
    from steerable.policy.evaluate import exact_match, text_cases
    from steerable.recipes import load_recipe

    ds = open_dataset(dataset)
    where = latest_checkpoint(checkpoint)
    assert where is not None
    state = read_training_state(where)
    loaded = load_policy(where)
    subtask_only = load_recipe("hierarchical").blend["high_level_subtask"]  # type: ignore[index]
    held = PolicyDataset(ds, subtask_only, loaded.model.cfg, loaded.processor.image_size, state["eval_episodes"])
    stride = max(1, len(held) // max_cases)
    cases = text_cases(held[i] for i in range(0, len(held), stride))
    result: dict[str, Any] = dict(exact_match(loaded.model, loaded.processor, cases))
    # Majority class of the *training* episodes, predicted for every held-out case.
    train_subtasks: Counter[str] = Counter()
    for ep in state["train_episodes"]:
        rows = ds.read_episode(ep, ["language_persistent"]).column("language_persistent")[0].as_py() or []
        train_subtasks.update(r["content"] for r in rows if r["style"] == "subtask")
    top = train_subtasks.most_common(1)[0][0]
    result["train_majority_baseline"] = sum(c.expected == top for c in cases) / max(1, len(cases))
    result["train_majority_subtask"] = top
    return result


# Evaluation seeds: the simulator draws seed s's scene from rng([s, 7]) and make-dataset's episode e
# from rng([seed, e]), so seeds from 1000 never repeat a training scene of a seed-0 dataset.
EVAL_SEED = 1000


def _run_eval(checkpoint: Path, high: str, low: str, episodes: int, *extra: str) -> dict[str, Any]:
    out = _steerable("run", "--env", "sim", "--high_level", high, "--low_level", low, "--policy.path",
                     str(checkpoint), "--eval_episodes", str(episodes), "--seed", str(EVAL_SEED), "--json", *extra)
    return dict(json.loads(out.strip().splitlines()[-1]))


def pick_rate(checkpoint: Path, episodes: int, seconds: float, *, bc: bool) -> dict[str, float]:
    """The learned low level alone in the sim (privileged observation), on held-out seeds: asked to
    pick up the first cube of the task (BC: given the task), does it hold that cube within `seconds`?
    Also the mean closest xy distance of the gripper to that cube."""
    import numpy as np

    from steerable.runtime.policy_adapter import load_low_level
    from steerable.synthetic.env import SimEnv

    low = load_low_level(checkpoint, observation="privileged")
    env = SimEnv(cameras=tuple(c.rsplit(".", 1)[-1] for c in low.runner.cfg.cameras))
    grasped, closest = 0, []
    for seed in range(10_000, 10_000 + episodes):
        spec = env.reset(seed, difficulty="easy")
        cube = spec.steps[0].cube
        assert env.world is not None
        index = env.world.scene.cube_index(cube)
        command = spec.task if bc else f"pick up the {cube}"
        best = float("inf")
        while env.steps_taken < seconds * env.fps:
            for action in low.act(env.observe(), command).actions:
                env.send_action(action)
            world = env.world
            x, y, _ = world.positions[index]
            best = min(best, float(np.hypot(world.gripper.x - x, world.gripper.y - y)))
            if world.held == index:
                grasped += 1
                break
        closest.append(best)
    return {"grasp_rate": grasped / episodes, "closest_cm": 100 * float(np.mean(closest))}


def both_levels(args: argparse.Namespace) -> tuple[list[tuple[str, str]], dict[str, Any]]:
    """The learned low level with privileged state, against the BC baseline (see the module docstring)."""
    data = args.work / "data_privileged"
    if not (data / "meta" / "info.json").is_file():
        _steerable("make-dataset", "synthetic", "--out", str(data), "--episodes", str(args.episodes),
                   "--difficulty", "easy", "--with_language", "--privileged_state")
    flags = ("--policy.state_key", PRIVILEGED_KEYS, *shlex.split(args.both_train))
    policy, bc = args.work / "policy_privileged", args.work / "bc_privileged"
    (args.work / "bc.yaml").write_text(BC_RECIPE, encoding="utf-8")
    times = {"policy": _train(data, policy, *flags), "BC": _train(data, bc, "--recipe", str(args.work / "bc.yaml"), *flags)}
    rows = [(f"train time, privileged {name}", "(already trained)" if seconds != seconds else f"{seconds / 60:.1f} min")
            for name, seconds in times.items()]
    if args.both_train:
        rows.append(("extra train flags", args.both_train))
    results: dict[str, Any] = {}
    for name, path, is_bc in (("policy", policy, False), ("bc", bc, True)):
        pick = pick_rate(path, args.both_episodes, args.pick_seconds, bc=is_bc)
        rows.append((f"pick test, {name} low level", f"grasp rate {pick['grasp_rate']:.2f} over {args.both_episodes} "
                                                      f"episodes, closest {pick['closest_cm']:.1f} cm on average"))
        results[f"pick_{name}"] = pick["grasp_rate"]
    extra = ("--observation", "privileged", "--max_seconds", str(args.both_seconds), "--workers", "1")
    runs = [("(a) scripted high / policy low", "scripted", policy, "a_scripted_policy"),
            ("(b) BC without language (none / policy)", "none", bc, "b_bc"),
            ("(c) policy high / policy low", "policy", policy, "c_policy_policy")]
    for label, high, path, key in runs:
        started = time.perf_counter()
        try:
            report = _run_eval(path, high, "policy", args.both_episodes, *extra)
        except SystemExit as exc:
            rows.append((label, f"failed: {str(exc).splitlines()[-1][:80]}"))
            continue
        rows.append((label, f"success {report['success_rate']:.2f} over {report['episodes']} episodes "
                            f"({time.perf_counter() - started:.0f} s)"))
        results[key] = report["success_rate"]
    return rows, results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, default=Path("/tmp/policy_sim"))
    parser.add_argument("--dataset", type=Path, default=None)
    parser.add_argument("--checkpoint", type=Path, default=None, help="a trained output folder (skip training)")
    parser.add_argument("--episodes", type=int, default=60)
    parser.add_argument("--eval_episodes", type=int, default=50)
    parser.add_argument("--cases", type=int, default=200, help="held-out subtask cases")
    parser.add_argument("--both_levels", action="store_true", help="also policy/policy and the BC baseline")
    parser.add_argument("--both_episodes", type=int, default=10, help="episodes of the policy-low-level runs")
    parser.add_argument("--both_levels_only", action="store_true", help="only the --both_levels part")
    parser.add_argument("--both_train", default="", help="extra `steerable train` flags for the privileged runs")
    parser.add_argument("--both_seconds", type=float, default=60.0, help="simulated seconds per episode")
    parser.add_argument("--difficulty", default="easy", help="task mix of the generated dataset (and so of the eval)")
    parser.add_argument("--pick_seconds", type=float, default=20.0, help="simulated seconds of the pick test")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    if args.both_levels_only:
        _report(*both_levels(args))
        return
    dataset = args.dataset or args.work / "data"
    if not (dataset / "meta" / "info.json").is_file():
        _steerable("make-dataset", "synthetic", "--out", str(dataset), "--episodes", str(args.episodes),
                   "--with_language", "--difficulty", args.difficulty)
    checkpoint = args.checkpoint or args.work / "policy"
    train_s = _train(dataset, checkpoint) if args.checkpoint is None else float("nan")
    rows: list[tuple[str, str]] = [("train time (default settings, CPU)", f"{train_s / 60:.1f} min")]
    acc = subtask_accuracy(dataset, checkpoint, args.cases)
    rows += [
        ("held-out subtask exact match", f"{acc['exact_match']:.3f} ({acc['cases']} cases)"),
        ("majority baseline (train majority)", f"{acc['train_majority_baseline']:.3f}"),
        ("majority baseline (held-out majority)", f"{acc['majority_baseline']:.3f}"),
    ]
    results: dict[str, Any] = {"exact_match": acc["exact_match"], "majority": acc["train_majority_baseline"]}
    runs = [("policy high / scripted low", "policy", "scripted", ()),
            ("  with interjections", "policy", "scripted", ("--eval_interjections",)),
            ("scripted high / scripted low (ceiling)", "scripted", "scripted", ())]
    for label, high, low, extra in runs:
        started = time.perf_counter()
        try:
            # The ceiling has no policy to take the task mix from: every run names it.
            report = _run_eval(checkpoint, high, low, args.eval_episodes, "--eval_difficulty", args.difficulty,
                               *extra)
        except SystemExit as exc:
            rows.append((label, f"failed: {str(exc).splitlines()[-1][:80]}"))
            continue
        kinds = ", ".join(f"{k} {v['success_rate']:.2f}" for k, v in sorted(report["by_kind"].items()))
        rows.append((label, f"success {report['success_rate']:.2f} over {report['episodes']} "
                            f"{report['difficulty']} episodes ({kinds}; {time.perf_counter() - started:.0f} s)"))
        results[label.strip().split(" (")[0].replace(" ", "_").replace("/", "")] = report["success_rate"]
    if args.both_levels:
        more_rows, more = both_levels(args)
        rows += more_rows
        results.update(more)
    _report(rows, results)


def _report(rows: list[tuple[str, str]], results: dict[str, Any]) -> None:
    width = max(len(r[0]) for r in rows) + 2
    print("oracle-language experiment (tiny policy, CPU)")
    for label, value in rows:
        print(f"{label:<{width}}{value}")
    print("RESULT " + " ".join(f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}" for k, v in results.items()))


if __name__ == "__main__":
    main()
