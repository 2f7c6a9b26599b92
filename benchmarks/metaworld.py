"""Meta-World, a benchmark nobody here wrote: steerable's policy, LeRobot's ACT and diffusion policy (and
SmolVLA) trained on the same recorded demonstrations, scored under LeRobot's protocol (issue 36, part 2).

    .venv/bin/python benchmarks/metaworld.py --out /tmp/mw --budget_s 20m
    .venv/bin/python benchmarks/metaworld.py --out /tmp/mw_smoke --budget_s 30 --episodes 2 \\
        --eval_episodes 2 --policies steerable,act --save_every 2      # a smoke run: the pipeline, not a figure
    .venv/bin/python benchmarks/metaworld.py --out /tmp/mw50 --gpu     # MT50, on a GPU (below)

Steps, each printed before it runs, all from the LeRobot venv (`--lerobot_venv`, with `lerobot[metaworld]`):
`steerable make-dataset metaworld --tasks TASKS --episodes N --out DIR` (the package's scripted policies, as
a LeRobot v3 dataset with LeRobot's Meta-World features: its camera, 4-d state, 4-d action, the task
description as the task, at `--image_size` pixels, default 64; `--dataset_args` adds make-dataset flags),
then each policy trained for `--budget_s` of training (`benchmarks/_peers.py`: CPU seconds of the trainer, start-up
included; the newest checkpoint at the budget is scored), then two evaluations of each checkpoint:
- `lerobot` (the protocol the published figures use): `lerobot-eval --env.type=metaworld --env.task=TASKS
  --eval.n_episodes=10` (10 episodes per task, LeRobot's success signal `info["is_success"]`);
- `steerable`: `steerable run --env lerobot --env.type=metaworld --env.task=TASK --eval_episodes 10 --json`
  per task (steerable's policy as both levels; a LeRobot policy as the low level under `--high_level none`).
  steerable's policy learns its actions from the subtask rows make-dataset writes where a task's scripted
  policy names its phases (steerable.synthetic.metaworld.phase_texts): a task without them (reach-v3,
  drawer-open-v3, ...) teaches it no action, and a dataset of such tasks alone leaves it out of the table.
`--env_args` adds `--env.*` flags to both (e.g. an image size the dataset was recorded at).
lerobot-eval resizes nothing: ACT, trained on the recording's small frames, sees 480-pixel frames there and
fails for that reason; `steerable run` gives every policy frames at the size it was trained on, so its
column is the like-for-like comparison of the policies (both are printed).

Default tasks, and why: button-press-topdown-v3, drawer-close-v3 (easy group), sweep-into-v3 (medium),
push-v3 and pick-place-v3 (hard). lerobot-eval renders Meta-World's 480 x 480 camera, which a CPU does at
about 3 steps/s (MuJoCo's OSMesa), and runs every episode to 500 steps unless it succeeds: about 3 CPU
minutes an episode, 30 per task and policy. Five tasks, from a press and a slide through sweeping and
pushing an object to a goal to a grasp-and-place, span three of MT50's four groups at a cost one machine
pays in a night, and each names its phases, so steerable's policy has subtasks to learn. `--gpu` is the
full configuration: the 50 tasks of MT50 (LeRobot's groups easy, medium, hard, very_hard), 50
demonstrations per task, 4 hours of wall-clock training per policy on `--device cuda` (a budget in wall
seconds there: CPU seconds say little of a GPU's work), batch 32, SmolVLA included, 10 episodes per task.

The published MT50 averages (SmolVLA 57.3 %, pi0 47.9 %, from the SmolVLA paper; /work/shared/reference/
anchors.md) are printed beside ours, labelled: pretrained backbones, a GPU budget, all 50 tasks: a
different budget and backbone, not a like-for-like comparison. Prints the tables and ends with a `RESULT`
line (each policy's average over the tasks under LeRobot's protocol). OUT/results.json is written again after
each policy, so a run stopped part way keeps the policies it finished. Not part of `make test`.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from dataclasses import asdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _peers import (  # noqa: E402  # the shared helpers sit beside this script
    LEROBOT_POLICIES,
    REPO,
    Row,
    Score,
    Training,
    format_table,
    lerobot_eval_seeds,
    parse_budget,
    parse_names,
    run_logged,
    save_json,
    tiny_vlm,
    train_policy,
)

POLICIES = ("steerable", *LEROBOT_POLICIES)
EVALUATORS = ("lerobot", "steerable")
DEFAULT_TASKS = "button-press-topdown-v3,drawer-close-v3,sweep-into-v3,push-v3,pick-place-v3"
MT50 = "easy,medium,hard,very_hard"
# Published MT50 success rates (%), pretrained backbones and a GPU budget: the SmolVLA paper.
PUBLISHED = {"SmolVLA (published: pretrained VLM, GPU budget, MT50)": 57.3,
             "pi0 (published: pretrained VLM, GPU budget, MT50)": 47.9}
GPU_PRESET = {"tasks": MT50, "episodes": 50, "budget_s": 4 * 3600.0, "clock": "wall", "device": "cuda",
              "batch_size": 32, "save_every": 1000, "policies": list(POLICIES)}


def task_groups(python: Path) -> dict[str, list[str]]:
    """LeRobot's Meta-World difficulty groups (its own table, read by the LeRobot venv's `python`)."""
    code = ("import json, pathlib, lerobot.envs as e; "
            "print(json.dumps(json.loads((pathlib.Path(e.__file__).parent / 'metaworld_config.json')"
            ".read_text())['DIFFICULTY_TO_TASKS']))")
    import subprocess

    out = subprocess.run([str(python), "-c", code], capture_output=True, text=True, timeout=120, check=True)
    return dict(json.loads(out.stdout))


def expand_tasks(text: str, groups: dict[str, list[str]]) -> list[str]:
    """Task names from a comma-separated list of tasks and LeRobot's group names (easy, medium, ...), in
    order, each once."""
    names: list[str] = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        for task in groups.get(part, [part]):
            if task not in names:
                names.append(task)
    if not names:
        raise ValueError(f"tasks {text!r}: name Meta-World tasks (e.g. reach-v3) or groups ({', '.join(groups)})")
    return names


def _args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, required=True, help="work folder: dataset, runs, evaluations, results.json")
    p.add_argument("--gpu", action="store_true", help="the full MT50 configuration on a GPU (the docstring)")
    p.add_argument("--tasks", default=None, help=f"tasks or LeRobot groups (default {DEFAULT_TASKS})")
    p.add_argument("--episodes", type=int, default=None, help="make-dataset metaworld --episodes (default 20)")
    p.add_argument("--budget_s", type=parse_budget, default=None, help="training budget per policy (default 20m)")
    p.add_argument("--same_steps", type=int, default=0,
                   help="also train each policy for N steps, its own schedule whole, and score it (0: not)")
    p.add_argument("--policies", type=lambda t: parse_names(t, POLICIES, "policies"), default=None)
    p.add_argument("--evaluators", type=lambda t: parse_names(t, EVALUATORS, "evaluators"), default=list(EVALUATORS))
    p.add_argument("--eval_episodes", type=int, default=10, help="episodes per task (LeRobot's protocol: 10)")
    p.add_argument("--seed", type=int, default=1000, help="first evaluation seed")
    p.add_argument("--max_seconds", type=float, default=None,
                   help="steerable run's limit per episode in simulated seconds (default: the env's own 500 steps; "
                        "lerobot-eval always runs those)")
    p.add_argument("--batch_size", type=int, default=None, help="lerobot-train's batch (default 8)")
    p.add_argument("--save_every", type=int, default=None, help="steps between checkpoints (default 50)")
    p.add_argument("--max_steps", type=int, default=100_000)
    p.add_argument("--device", default=None, help="cpu (default) or cuda")
    p.add_argument("--image_size", type=int, default=64, help="make-dataset metaworld --image_size (pixels)")
    p.add_argument("--dataset_args", default="", help="more `steerable make-dataset metaworld` flags, one string")
    p.add_argument("--env_args", default="", help="more --env.* flags for both evaluations, one string")
    p.add_argument("--steerable_args", default="", help="more `steerable train` flags, one string")
    p.add_argument("--lerobot_venv", type=Path, default=REPO / ".venv-lerobot")
    args = p.parse_args(argv)
    preset = GPU_PRESET if args.gpu else {"tasks": DEFAULT_TASKS, "episodes": 20, "budget_s": 1200.0, "clock": "cpu",
                                          "device": "cpu", "batch_size": 8, "save_every": 50,
                                          "policies": ["steerable", "act", "diffusion"]}
    for key, value in preset.items():
        if getattr(args, key, None) is None:
            setattr(args, key, value)
    for name in ("episodes", "eval_episodes", "batch_size", "save_every", "max_steps"):
        if getattr(args, name) < 1:
            p.error(f"--{name} must be at least 1")
    if args.same_steps < 0:
        p.error("--same_steps must be 0 or more")
    if not (args.lerobot_venv / "bin" / "lerobot-train").is_file():
        p.error(f"no lerobot-train in {args.lerobot_venv}/bin: `make test` builds it, or pass --lerobot_venv")
    return args


def has_language(data: Path) -> bool:
    """Whether the dataset has language columns (the oracle subtasks make-dataset metaworld writes)."""
    features = json.loads((data / "meta" / "info.json").read_text(encoding="utf-8"))["features"]
    return "language_persistent" in features or "language_events" in features


def _evaluate(policy: str, checkpoint: Path, evaluator: str, tasks: list[str], args: argparse.Namespace,
              work: Path, run: str = "") -> dict[str, Score]:
    """{task: score} of one checkpoint under one evaluator, the same seeds for every task and policy; `run`
    names the training in the logs' names when a policy has two (`--same_steps`)."""
    bin_dir = args.lerobot_venv / "bin"
    env_args = shlex.split(args.env_args)
    tag = f"{run or policy}_{evaluator}"
    seeds = range(args.seed, args.seed + args.eval_episodes)
    if evaluator == "lerobot":
        per_task, wall = lerobot_eval_seeds(
            [str(bin_dir / "lerobot-eval"), f"--policy.path={checkpoint}", f"--policy.device={args.device}",
             "--env.type=metaworld", f"--env.task={','.join(tasks)}", *env_args,
             f"--eval.n_episodes={args.eval_episodes}", "--eval.batch_size=1", "--eval.use_async_envs=false"],
            args.seed, work / f"{tag}_eval", work / f"{tag}.eval.log")
        scores = {}
        for name, outcomes in per_task.items():  # "group:id"; a named task is its own group, id 0
            task = name.split(":")[0]
            scores[task] = Score(sum(outcomes.get(s, False) for s in seeds), len(seeds), wall / len(per_task))
        return scores
    levels = (["--high_level", "policy", "--low_level", "policy", "--policy.path", str(checkpoint)]
              if policy == "steerable" else
              ["--high_level", "none", "--low_level", "lerobot", "--lerobot.policy_path", str(checkpoint),
               "--lerobot.device", args.device])
    scores = {}
    for task in tasks:
        log = work / f"{tag}_{task}.eval.log"
        wall = run_logged([str(bin_dir / "steerable"), "run", "--env", "lerobot", "--env.type=metaworld",
                           f"--env.task={task}", *env_args, *levels, "--eval_episodes", str(args.eval_episodes),
                           "--seed", str(args.seed), "--workers", "1", "--json",
                           *(["--max_seconds", str(args.max_seconds)] if args.max_seconds else [])], log)
        report = json.loads(log.read_text(encoding="utf-8").strip().splitlines()[-1])
        scores[task] = Score(round(float(report["success_rate"]) * int(report["episodes"])), int(report["episodes"]),
                             wall)
    return scores


def pooled(scores: dict[str, Score]) -> Score:
    """Every task's episodes together: the average over tasks (each task has the same episodes)."""
    return Score(sum(s.successes for s in scores.values()), sum(s.episodes for s in scores.values()),
                 sum(s.wall_s for s in scores.values()))


def per_task_table(tasks: list[str], columns: dict[str, dict[str, Score]]) -> str:
    """A markdown table: one row per task, one column per policy and evaluator (successes / episodes)."""
    lines = ["| task | " + " | ".join(columns) + " |", "|" + "---|" * (len(columns) + 1)]
    for task in tasks:
        cells = [f"{c[task].successes}/{c[task].episodes}" if task in c else "-" for c in columns.values()]
        lines.append(f"| {task} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def save_results(path: Path, tasks: list[str], rows: list[Row], columns: dict[str, dict[str, Score]]) -> None:
    """Write the rows and per-task scores so far to `path` (after each policy, so a run stopped part way keeps
    the policies it finished), replacing it whole."""
    save_json(path, {"tasks": tasks, "rows": [asdict(r) for r in rows],
                     "per_task": {k: {t: asdict(s) for t, s in v.items()} for k, v in columns.items()}})


def main(argv: list[str] | None = None) -> None:
    args = _args(argv)
    # MuJoCo renders offscreen: OSMesa on a CPU (EGL without a GPU failed here), EGL beside a GPU.
    for name in ("MUJOCO_GL", "PYOPENGL_PLATFORM"):
        os.environ.setdefault(name, "egl" if args.device.startswith("cuda") else "osmesa")
    work = args.out.resolve()
    work.mkdir(parents=True, exist_ok=True)
    bin_dir = args.lerobot_venv / "bin"
    python = bin_dir / "python"
    tasks = expand_tasks(args.tasks, task_groups(python))
    data = work / "data"
    if not (data / "meta" / "info.json").is_file():
        run_logged([str(bin_dir / "steerable"), "make-dataset", "metaworld", "--tasks", ",".join(tasks),
                    "--episodes", str(args.episodes), "--out", str(data), "--image_size", str(args.image_size),
                    *shlex.split(args.dataset_args)],
                   work / "make_dataset.log")
    # lerobot-eval renders 480 x 480: diffusion's spatial softmax is sized for the training images, so it
    # resizes what it sees to them. ACT runs on any size but was trained on `side`-pixel frames: under
    # lerobot-eval it sees frames 480/side times larger (measured: 0/10 there, 7/10 with its own size through
    # `steerable run`, button-press-topdown-v3), so the `steerable` evaluator is its like-for-like score.
    side = args.image_size
    extra = {"diffusion": [f"--policy.resize_shape=[{side},{side}]", "--policy.crop_ratio=0.9"],
             "steerable": shlex.split(args.steerable_args)}
    skipped = ""
    if "steerable" in args.policies and not has_language(data):
        skipped = "not trained: the dataset has no subtask rows (none of its tasks names phases) to condition on"
    how = Training(bin_dir, args.budget_s, args.save_every, args.max_steps, args.batch_size, args.device,
                   args.clock, tiny_vlm(python, work) if "smolvla" in args.policies else None, extra)
    rows: list[Row] = []
    columns: dict[str, dict[str, Score]] = {}
    for policy in args.policies:
        if policy == "steerable" and skipped:
            rows.extend(Row(policy, evaluator, None, None, note=skipped) for evaluator in args.evaluators)
            continue
        trained = train_policy(policy, data, work / policy, how)
        same = train_policy(policy, data, work / f"{policy}_same_steps", how, steps=args.same_steps) \
            if args.same_steps else None
        for evaluator in args.evaluators:
            at_steps = None
            if same is not None and same.checkpoint is not None:
                at = _evaluate(policy, same.checkpoint, evaluator, tasks, args, work, f"{policy}_same_steps")
                columns[f"{policy} at {args.same_steps} steps ({evaluator})"] = at
                at_steps = pooled(at)
            if trained.checkpoint is None:
                rows.append(Row(policy, evaluator, None, trained, same_steps=at_steps,
                                note="no checkpoint within the budget"))
                continue
            scores = _evaluate(policy, trained.checkpoint, evaluator, tasks, args, work)
            columns[f"{policy} ({evaluator})"] = scores
            rows.append(Row(policy, evaluator, pooled(scores), trained, same_steps=at_steps))
        save_results(work / "results.json", tasks, rows, columns)
    clock = "CPU" if args.clock == "cpu" else "wall-clock"
    print(f"\n## Meta-World, {len(tasks)} tasks, {args.eval_episodes} episodes each; {args.budget_s:.0f} {clock} "
          f"s of training per policy (success: every task's episodes together, 95 % Wilson interval)\n")
    print(format_table(rows, same_steps=args.same_steps or None))
    print("\nPer task (successes / episodes):\n")
    print(per_task_table(tasks, columns))
    print("\nPublished, for scale only (different training budget and backbone, all 50 tasks):\n")
    print("| policy | MT50 success |\n|---|---|")
    for name, rate in PUBLISHED.items():
        print(f"| {name} | {rate:.1f} % |")
    save_results(work / "results.json", tasks, rows, columns)
    main_eval = args.evaluators[0]
    figures = [f"{r.policy}={r.result.rate:.2f}" for r in rows if r.evaluator == main_eval and r.result]
    print(f"\nRESULT {' '.join(figures)} evaluator={main_eval} tasks={len(tasks)} "
          f"eval_episodes={args.eval_episodes} budget_s={args.budget_s:.0f} published_smolvla=0.573 "
          "published_pi0=0.479")


if __name__ == "__main__":
    main()
