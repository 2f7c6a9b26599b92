"""LeRobot's ACT, trained by `lerobot-train` on a steerable dataset, scored by `lerobot-eval` in steerable's
tabletop (`--env.type=steerable_tabletop`, the env plugin): LeRobot's own tools end to end (issue 20).

    .venv/bin/python benchmarks/lerobot_act.py [--work /tmp/act] [--episodes 20] [--steps 100] [--device cuda]

Three commands, each printed before it runs, all from the LeRobot venv (`--lerobot_venv`, default
`.venv-lerobot`, where `make test` installs lerobot and the plugins): `steerable make-dataset synthetic`
(easy tasks, the cameras given), `lerobot-train --policy.type=act` on it (a small ACT, no pretrained
backbone: nothing comes from the Hub), `lerobot-eval` of its last checkpoint on `--eval_episodes`
seeded episodes of the same task mix. Prints one table and `RESULT act_pc_success=...`. A few CPU
minutes per 100 training steps at these sizes: ACT needs thousands of steps (a GPU) before it places
a cube, so the default run measures that the pipeline works and what an undertrained ACT scores.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _run(argv: list[str]) -> float:
    print("$ " + shlex.join(argv), flush=True)
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, cwd=REPO, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"{argv[0]} exited {done.returncode}:\n{done.stderr[-4000:]}")
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=None,
                        help="folder for the dataset, the run and the eval (default: a new temporary folder)")
    parser.add_argument("--lerobot_venv", type=Path, default=REPO / ".venv-lerobot")
    parser.add_argument("--episodes", type=int, default=20, help="synthetic training episodes")
    parser.add_argument("--cameras", default="top", help="cameras of the dataset and the env")
    parser.add_argument("--steps", type=int, default=100, help="lerobot-train steps")
    parser.add_argument("--batch_size", type=int, default=8)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--eval_episodes", type=int, default=10)
    parser.add_argument("--episode_length", type=int, default=300, help="env steps per eval episode (15 fps)")
    args = parser.parse_args()
    bin_dir = args.lerobot_venv / "bin"
    if not (bin_dir / "lerobot-train").is_file():
        sys.exit(f"no lerobot-train in {bin_dir}: run `make test` (it builds {args.lerobot_venv}) "
                 "or pass --lerobot_venv")
    work = (args.work or Path(tempfile.mkdtemp(prefix="lerobot_act_"))).resolve()
    work.mkdir(parents=True, exist_ok=True)
    data, run, evals = work / "dataset", work / "act", work / "eval"
    for previous in (run, evals):  # lerobot-train refuses an existing output folder; the dataset is reused
        shutil.rmtree(previous, ignore_errors=True)
    timings: dict[str, float] = {}
    if not (data / "meta" / "info.json").is_file():
        timings["make-dataset"] = _run([
            str(bin_dir / "steerable"), "make-dataset", "synthetic", "--out", str(data), "--episodes",
            str(args.episodes), "--difficulty", "easy", "--cameras", args.cameras,
        ])
    timings["lerobot-train"] = _run([
        str(bin_dir / "lerobot-train"), "--policy.type=act", "--dataset.repo_id=local/steerable_synthetic",
        f"--dataset.root={data}", f"--steps={args.steps}", f"--batch_size={args.batch_size}", "--num_workers=0",
        f"--save_freq={args.steps}", f"--log_freq={max(1, args.steps // 10)}", f"--output_dir={run}",
        f"--policy.device={args.device}", "--policy.push_to_hub=false", "--wandb.enable=false",
        "--policy.pretrained_backbone_weights=null", "--policy.dim_model=256", "--policy.dim_feedforward=1024",
        "--policy.n_encoder_layers=2", "--policy.chunk_size=20", "--policy.n_action_steps=20",
    ])
    timings["lerobot-eval"] = _run([
        str(bin_dir / "lerobot-eval"), f"--policy.path={run / 'checkpoints' / 'last' / 'pretrained_model'}",
        f"--policy.device={args.device}", "--env.type=steerable_tabletop", f"--env.cameras={args.cameras}",
        "--env.difficulty=easy", f"--env.episode_length={args.episode_length}",
        f"--eval.n_episodes={args.eval_episodes}", f"--eval.batch_size={min(args.eval_episodes, 10)}",
        "--eval.use_async_envs=false", f"--output_dir={evals}",
    ])
    overall = json.loads((evals / "eval_info.json").read_text(encoding="utf-8"))["overall"]
    print("\n| stage | seconds |\n|---|---|")
    for stage, seconds in timings.items():
        print(f"| {stage} | {seconds:.0f} |")
    print(f"\nACT, {args.steps} steps of batch {args.batch_size} on {args.episodes} easy episodes "
          f"({args.cameras}): {overall['pc_success']:.1f} % of {overall['n_episodes']} episodes succeeded, "
          f"mean max reward {overall['avg_max_reward']:.2f}")
    print(f"RESULT act_pc_success={overall['pc_success']:.1f} n_episodes={overall['n_episodes']} "
          f"train_steps={args.steps} train_s={timings['lerobot-train']:.0f} eval_s={timings['lerobot-eval']:.0f}")


if __name__ == "__main__":
    main()
