"""steerable's policy beside LeRobot's ACT, diffusion policy and SmolVLA on the same data, the same CPU-time
budget and the same evaluation (issue 36, part 1).

    .venv/bin/python benchmarks/policy_peers.py --out /tmp/peers --budget_s 20m --eval_episodes 50
    .venv/bin/python benchmarks/policy_peers.py --out /tmp/peers_smoke --budget_s 30 --episodes 4 \\
        --eval_episodes 2 --max_seconds 6 --save_every 2      # a smoke run: the pipeline, not a figure

Every policy reads the cameras (top and wrist, 224 x 160) and the gripper's proprioception, never the
objects' positions; each is trained from random weights (LeRobot's policies in the small configurations of
`benchmarks/_peers.py`, built by `lerobot-train --policy.type=...`; steerable's by `steerable train` with its
defaults) for `--budget_s` CPU seconds (start-up included; `_peers.py` says how the budget stops a run),
one training at a time on one thread. `--same_steps N` adds a column: each trained again for N steps.
`--steerable_args` adds `steerable train` flags to steerable's training (a change of its camera path measured
beside the peers, e.g. `--steerable_args "--policy.image_size 64"`).

Settings (`--settings`):
- `one_task`: one task, `--task` (default "put the orange cube in the blue bin"), in randomised scenes:
  every peer applies, language or not. The simulator draws each scene's objects, so the task fits about a
  third of them; the training demonstrations are the scripted controller's, recorded by `steerable run
  --record` on the first `--episodes` training seeds (from 0) whose scene has the task's cube and bin
  (`make-dataset synthetic` draws a task per scene and has no fixed-task mode); the evaluation runs the
  first `--eval_episodes` seeds from `--seed` the task fits, through the tabletop with the task fixed
  (`--env.task_text`), one evaluation per run of consecutive such seeds.
- `language_mix`: `make-dataset synthetic --difficulty easy --with_language --interjection_rate 0` (the
  easy mix: one-step, two-step and stacking tasks over 3-4 cubes, the task in words), scored on the easy mix
  of seeds `--seed` .. `--seed + --eval_episodes - 1`. SmolVLA and steerable read the task; ACT and
  diffusion read no language, so their row is the floor of a policy that cannot tell which cube is meant.

Evaluators (`--evaluators`), the same seeds for every policy: `steerable` is `steerable run --eval_episodes
--json` (steerable's policy as both levels, `--high_level policy --low_level policy`; a LeRobot policy under
`--high_level none --low_level lerobot`, given the task itself), `lerobot` is `lerobot-eval
--env.type=steerable_tabletop` (every checkpoint, steerable's included, through LeRobot's `select_action`).
An episode lasts at most `--max_seconds` simulated seconds in both. ms / chunk: `_peers.py chunk-ms`.
`--train_scenes N` (one_task) scores each checkpoint again on the first N scenes it was trained on, by the
same evaluators: a policy that fails there has not fit its data (more training or capacity), one that
succeeds there and not on the held-out seeds has memorised its scenes (more data or augmentation). The
language_mix setting has no such column: its scenes are drawn per dataset episode, not by a run seed.
Prints one markdown table, writes OUT/results.json (again after each policy), and ends with a `RESULT` line
(the `steerable` evaluator's success rate of each setting and policy). Not part of `make test`: minutes per policy.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _peers import (  # noqa: E402  # the shared helpers sit beside this script
    LEROBOT_POLICIES,
    REPO,
    Row,
    Score,
    Training,
    chunk_ms_in_venv,
    format_table,
    lerobot_eval,
    parse_budget,
    parse_names,
    run_logged,
    save_json,
    steerable_eval,
    tiny_vlm,
    train_policy,
)

POLICIES = ("steerable", *LEROBOT_POLICIES)
SETTINGS = ("one_task", "language_mix")
EVALUATORS = ("steerable", "lerobot")
FPS = 15
# A task in the easy mix's words, for timing a chunk of the language_mix policies.
MIX_TASK = "put the red cube in the blue bin"


def _names(known: tuple[str, ...], what: str) -> Callable[[str], list[str]]:
    def parse(text: str) -> list[str]:
        return parse_names(text, known, what)

    parse.__name__ = what
    return parse


def _args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, required=True, help="work folder: datasets, runs, evaluations, results.json")
    p.add_argument("--budget_s", type=parse_budget, default=parse_budget("20m"),
                   help="CPU seconds of training per policy (30, 5m, 1.5h; default 20m)")
    p.add_argument("--same_steps", type=int, default=0, help="also train each policy N steps and score it (0: not)")
    p.add_argument("--policies", type=_names(POLICIES, "policies"), default=list(POLICIES))
    p.add_argument("--settings", type=_names(SETTINGS, "settings"), default=list(SETTINGS))
    p.add_argument("--evaluators", type=_names(EVALUATORS, "evaluators"), default=list(EVALUATORS))
    p.add_argument("--episodes", type=int, default=100, help="training episodes per setting")
    p.add_argument("--eval_episodes", type=int, default=50, help="scored episodes per policy, setting, evaluator")
    p.add_argument("--seed", type=int, default=1000, help="first evaluation seed (no training scene repeats)")
    p.add_argument("--task", default="put the orange cube in the blue bin", help="the one_task setting's task")
    p.add_argument("--train_scenes", type=int, default=0,
                   help="one_task: also score each checkpoint on its first N training scenes (0: not)")
    p.add_argument("--max_seconds", type=float, default=20.0, help="simulated seconds of an evaluation episode")
    p.add_argument("--batch_size", type=int, default=8, help="lerobot-train's batch (steerable train: its default)")
    p.add_argument("--save_every", type=int, default=50, help="steps between checkpoints (the budget's granularity)")
    p.add_argument("--max_steps", type=int, default=100_000, help="steps a budgeted run is given (never reached)")
    p.add_argument("--steerable_args", default="",
                   help="more `steerable train` flags for steerable's policy (e.g. '--policy.image_size 64')")
    p.add_argument("--lerobot_venv", type=Path, default=REPO / ".venv-lerobot")
    args = p.parse_args(argv)
    for name in ("episodes", "eval_episodes", "batch_size", "save_every", "max_steps"):
        if getattr(args, name) < 1:
            p.error(f"--{name} must be at least 1")
    if args.same_steps < 0:
        p.error("--same_steps must be 0 or more")
    if not 0 <= args.train_scenes <= args.episodes:
        p.error(f"--train_scenes must be from 0 to --episodes ({args.episodes}): the scenes trained on")
    if not (args.lerobot_venv / "bin" / "lerobot-train").is_file():
        p.error(f"no lerobot-train in {args.lerobot_venv}/bin: `make test` builds it, or pass --lerobot_venv")
    return args


def fitting_seeds(task: str, start: int, count: int) -> list[int]:
    """The first `count` seeds from `start` whose scene has the objects `task` names."""
    from steerable.synthetic.env import SimEnv

    env, found, seed = SimEnv(cameras=()), list[int](), start
    while len(found) < count:
        if env.reset(seed, task).steps:
            found.append(seed)
        seed += 1
        if seed - start > 100 * count + 1000:
            sys.exit(f"--task {task!r}: too few scenes have its objects; name a cube and bin of the simulator")
    return found


def training_seeds(task: str, count: int) -> list[int]:
    """The seeds of the one_task setting's first `count` training scenes (its demonstrations, in order)."""
    return fitting_seeds(task, 0, count)


def _one_task_dataset(args: argparse.Namespace, work: Path, bin_dir: Path) -> Path:
    data = work / "data"
    if (data / "meta" / "info.json").is_file():
        return data
    seeds = training_seeds(args.task, args.episodes)
    lines = [f"/task {args.task}"] + [x for s in seeds[1:] for x in (f"/reset {s}", f"/task {args.task}")]
    commands = work / "demonstrations.txt"
    commands.write_text("\n".join(lines) + "\n", encoding="utf-8")
    run_logged([str(bin_dir / "steerable"), "run", "--env", "sim", "--high_level", "scripted", "--low_level",
                "scripted", "--seed", str(seeds[0]), "--commands", str(commands), "--record", str(data),
                "--max_seconds", str(60 * len(seeds))], work / "record.log")
    return data


def _mix_dataset(args: argparse.Namespace, work: Path, bin_dir: Path) -> Path:
    data = work / "data"
    if not (data / "meta" / "info.json").is_file():
        run_logged([str(bin_dir / "steerable"), "make-dataset", "synthetic", "--out", str(data), "--episodes",
                    str(args.episodes), "--difficulty", "easy", "--with_language", "--interjection_rate", "0",
                    "--overwrite"], work / "make_dataset.log")
    return data


def _evaluate(policy: str, evaluator: str, checkpoint: Path, setting: str, args: argparse.Namespace, work: Path,
              scored: list[int], what: str = "") -> Score:
    bin_dir = args.lerobot_venv / "bin"
    length = int(args.max_seconds * FPS)
    step = checkpoint.parent.name if checkpoint.name == "pretrained_model" else checkpoint.name
    tag = f"{policy}_{evaluator}_{step}" + (f"_{what}" if what else "")
    if evaluator == "steerable":
        levels = (["--high_level", "policy", "--low_level", "policy", "--policy.path", str(checkpoint)]
                  if policy == "steerable" else
                  ["--high_level", "none", "--low_level", "lerobot", "--lerobot.policy_path", str(checkpoint),
                   "--lerobot.device", "cpu"])
        env = (["--env", "lerobot", "--env.type=steerable_tabletop", f"--env.task_text={args.task}",
                f"--env.episode_length={length}"] if setting == "one_task" else
               ["--env", "sim", "--eval_difficulty", "easy"])
        return steerable_eval([str(bin_dir / "steerable"), "run", *env, *levels, "--max_seconds",
                               str(args.max_seconds), "--workers", "1"], scored, work / f"{tag}.eval.log")
    task = [f"--env.task_text={args.task}"] if setting == "one_task" else []
    return lerobot_eval(
        [str(bin_dir / "lerobot-eval"), f"--policy.path={checkpoint}", "--policy.device=cpu",
         "--env.type=steerable_tabletop", "--env.difficulty=easy", *task, f"--env.episode_length={length}",
         "--eval.batch_size=1", "--eval.use_async_envs=false"], scored, work / f"{tag}_lerobot_eval",
        work / f"{tag}.eval.log")


def run_setting(setting: str, args: argparse.Namespace, rows: list[Row] | None = None,
                saved: Callable[[], None] = lambda: None) -> list[Row]:
    """Train and score every policy of one setting, appending to `rows` and calling `saved` after each policy."""
    rows = [] if rows is None else rows
    work = (args.out / setting).resolve()
    work.mkdir(parents=True, exist_ok=True)
    bin_dir = args.lerobot_venv / "bin"
    seen: list[int] = []
    if setting == "one_task":
        data, task = _one_task_dataset(args, work, bin_dir), args.task
        scored = fitting_seeds(args.task, args.seed, args.eval_episodes)
        seen = training_seeds(args.task, args.train_scenes) if args.train_scenes else []
    else:
        data, task = _mix_dataset(args, work, bin_dir), MIX_TASK
        scored = list(range(args.seed, args.seed + args.eval_episodes))
    python = args.lerobot_venv / "bin" / "python"
    how = Training(bin_dir, args.budget_s, args.save_every, args.max_steps, args.batch_size,
                   vlm=tiny_vlm(python, args.out.resolve()) if "smolvla" in args.policies else None,
                   policy_args={"steerable": shlex.split(args.steerable_args)})
    for policy in args.policies:
        trained = train_policy(policy, data, work / policy, how)
        if trained.checkpoint is None:
            note = "no checkpoint within the budget: lower --save_every or raise --budget_s"
            rows.extend(Row(policy, e, None, trained, note=note) for e in args.evaluators)
            saved()
            continue
        ms = chunk_ms_in_venv(python, trained.checkpoint, data, task, work / f"{policy}.chunk.log")
        same = train_policy(policy, data, work / f"{policy}_same_steps", how, steps=args.same_steps) \
            if args.same_steps else None
        floor = "reads no language: the floor" if setting == "language_mix" and policy in ("act", "diffusion") else ""
        for evaluator in args.evaluators:
            result = _evaluate(policy, evaluator, trained.checkpoint, setting, args, work, scored)
            at_steps = (_evaluate(policy, evaluator, same.checkpoint, setting, args, work, scored)
                        if same is not None and same.checkpoint is not None else None)
            fit = (_evaluate(policy, evaluator, trained.checkpoint, setting, args, work, seen, "train_scenes")
                   if seen else None)
            rows.append(Row(policy, evaluator, result, trained, ms, at_steps, note=floor, train_scenes=fit))
        saved()
    return rows


def save_results(path: Path, results: dict[str, list[Row]]) -> None:
    """Write every setting's rows so far to `path`, replacing it whole (after each policy, so a run stopped part
    way keeps what it finished)."""
    save_json(path, {s: [asdict(r) for r in rows] for s, rows in results.items()})


def main(argv: list[str] | None = None) -> None:
    args = _args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    results: dict[str, list[Row]] = {}
    where = args.out / "results.json"
    for setting in args.settings:
        results[setting] = []
        run_setting(setting, args, results[setting], lambda: save_results(where, results))
        print(f"\n## {setting}: budget {args.budget_s:.0f} CPU s per policy\n", flush=True)
        print(format_table(results[setting], same_steps=args.same_steps or None,
                           train_scenes=args.train_scenes if setting == "one_task" and args.train_scenes else None)
              + "\n", flush=True)
    figures = [f"{s}.{r.policy}={r.result.rate:.2f}" for s, rows in results.items() for r in rows
               if r.evaluator == args.evaluators[0] and r.result is not None]
    print(f"\nRESULT {' '.join(figures)} evaluator={args.evaluators[0]} budget_s={args.budget_s:.0f} "
          f"eval_episodes={args.eval_episodes}")


if __name__ == "__main__":
    main()
