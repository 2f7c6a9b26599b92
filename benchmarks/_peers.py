"""What benchmarks/policy_peers.py and benchmarks/metaworld.py share (issue 36): train a policy under a CPU-time
budget, score it with `steerable run --json` and `lerobot-eval`, time one chunk, print the table.

The budget is CPU seconds of the training process and its children (user + system, read with psutil every
second), start-up included (imports, decoding the dataset): what the run cost, whatever the trainer spends it
on. The trainer is given far more steps than it can reach (`--max_steps`) and saves a checkpoint every
`save_every` steps; at the budget the whole process group is stopped and the newest complete checkpoint is
the one scored, so "steps" is that checkpoint's step. A learning-rate schedule over `--steps` (steerable's
cosine, diffusion's) therefore stays near its peak under a budget: the same for every policy. The second
column of the table (`same steps`) trains each policy again for a fixed number of steps, its own schedule whole.

`python benchmarks/_peers.py chunk-ms CKPT DATASET TASK` (from the LeRobot venv) prints the median
milliseconds of one action chunk through LeRobot's own path (`make_policy`, the checkpoint's processors,
`select_action` over one chunk's worth of calls on a dataset frame): the same measure for every policy,
steerable's `steerable_hierarchical` included.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "LEROBOT_POLICIES",
    "REPO",
    "Row",
    "Score",
    "TrainResult",
    "Training",
    "chunk_ms_in_venv",
    "format_table",
    "lerobot_checkpoints",
    "lerobot_eval",
    "lerobot_eval_seeds",
    "read_eval_info",
    "lerobot_train_argv",
    "parse_budget",
    "parse_names",
    "run_logged",
    "save_json",
    "score",
    "seed_blocks",
    "steerable_checkpoints",
    "steerable_eval",
    "steerable_train_argv",
    "tiny_vlm",
    "train_policy",
    "train_under_budget",
]

REPO = Path(__file__).resolve().parents[1]
# Small configurations, random weights (nothing from the Hub): sizes a CPU trains a few thousand steps of.
LEROBOT_POLICIES: dict[str, list[str]] = {
    "act": ["--policy.pretrained_backbone_weights=null", "--policy.dim_model=256", "--policy.dim_feedforward=1024",
            "--policy.n_encoder_layers=2", "--policy.n_decoder_layers=1", "--policy.chunk_size=10",
            "--policy.n_action_steps=5"],
    "diffusion": ["--policy.pretrained_backbone_weights=null", "--policy.down_dims=[64,128,256]",
                  "--policy.n_obs_steps=2", "--policy.horizon=16", "--policy.n_action_steps=8",
                  "--policy.num_inference_steps=10", "--policy.spatial_softmax_num_keypoints=32"],
    # The VLM is the tiny SmolVLM tests/lerobot builds (config and tokenizer made here, random weights).
    "smolvla": ["--policy.load_vlm_weights=false", "--policy.num_vlm_layers=2", "--policy.num_expert_layers=2",
                "--policy.self_attn_every_n_layers=2", "--policy.expert_width_multiplier=0.5",
                "--policy.chunk_size=10", "--policy.n_action_steps=5", "--policy.num_steps=4",
                "--policy.resize_imgs_with_padding=[64,64]", "--policy.tokenizer_max_length=24"],
}
def parse_budget(text: str) -> float:
    """Seconds from '30', '30s', '5m', '1.5h' (argparse's `type`: a bad value is a one-line usage error); read
    as `steerable train --time_budget` reads a duration."""
    from steerable.policy.schedule import parse_duration

    try:
        seconds = parse_duration(text)
    except ValueError:
        seconds = None
    if seconds is None:
        raise ValueError(f"budget {text!r}: a positive number of seconds, or with s, m or h (30, 5m, 1.5h)")
    return seconds


parse_budget.__name__ = "budget"  # argparse names the type in its error


def save_json(path: Path, data: Any) -> None:
    """`data` as indented JSON at `path`, replacing it whole (a benchmark's results, rewritten after each policy:
    a run stopped part way keeps what it finished, never half a file)."""
    from steerable.dataset.atomic import atomic_write_bytes

    atomic_write_bytes(path, json.dumps(data, default=str, indent=2).encode("utf-8"), durable=False)


def parse_names(text: str, known: Sequence[str], what: str) -> list[str]:
    """Comma-separated names, each one of `known` (ValueError naming the unknown ones)."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        raise ValueError(f"{what} {text!r}: choose from {', '.join(known)}")
    return names


@dataclass
class TrainResult:
    """One training: the checkpoint scored, its step, CPU and wall seconds, whether the budget stopped it."""

    checkpoint: Path | None
    steps: int
    cpu_s: float
    wall_s: float
    stopped: bool


def _tree_cpu(proc: Any) -> float:
    """CPU seconds (user + system) of `proc` and its live children, 0 for one that just ended."""
    import psutil

    total = 0.0
    for each in [proc, *proc.children(recursive=True)]:
        try:
            t = each.cpu_times()
            total += t.user + t.system + getattr(t, "children_user", 0.0) + getattr(t, "children_system", 0.0)
        except psutil.Error:
            continue
    return total


def run_logged(argv: Sequence[str], log: Path, *, timeout: float | None = None, env: Mapping[str, str] | None = None
               ) -> float:
    """Run `argv` from the repository (stdout and stderr to `log`); wall seconds; exit with the log's tail on
    failure (a benchmark stops at the first failed command)."""
    print("$ " + shlex.join(str(a) for a in argv), flush=True)
    started = time.perf_counter()
    with open(log, "w", encoding="utf-8") as out:
        done = subprocess.run(list(argv), cwd=REPO, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                              env={**os.environ, **_QUIET, **(env or {})}, timeout=timeout)
    if done.returncode:
        sys.exit(f"{argv[0]} exited {done.returncode} (log {log}):\n{log.read_text(encoding='utf-8')[-3000:]}")
    return time.perf_counter() - started


# Offline (nothing from the Hub) and one thread: the machine's other jobs keep their cores, and the budget
# is the same kind of CPU second for every policy.
_QUIET = {"HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1",
          "TOKENIZERS_PARALLELISM": "false"}


def train_under_budget(argv: Sequence[str], out: Path, budget_s: float | None,
                       checkpoints: Callable[[Path], list[tuple[int, Path]]], log: Path, *, clock: str = "cpu"
                       ) -> TrainResult:
    """Run the trainer `argv` (writing to `out`) until it ends or has used `budget_s` seconds (None: no budget)
    of `clock` (cpu: CPU seconds of its process tree; wall: on a GPU, where CPU seconds say little), then its
    newest complete checkpoint. A trainer that fails before the budget stops the benchmark."""
    import psutil

    print("$ " + shlex.join(str(a) for a in argv), flush=True)
    started = time.perf_counter()
    stopped, cpu = False, 0.0
    with open(log, "w", encoding="utf-8") as sink:
        proc = subprocess.Popen(list(argv), cwd=REPO, stdin=subprocess.DEVNULL, stdout=sink,
                                stderr=subprocess.STDOUT, env={**os.environ, **_QUIET}, start_new_session=True)
        watched = psutil.Process(proc.pid)
        try:
            while proc.poll() is None:
                cpu = max(cpu, _tree_cpu(watched))
                spent = cpu if clock == "cpu" else time.perf_counter() - started
                if budget_s is not None and spent >= budget_s:
                    stopped = True
                    break
                time.sleep(1.0)
        finally:
            if proc.poll() is None:  # the budget (or Ctrl-C): the trainer's own process group, by its id
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
    wall = time.perf_counter() - started
    if proc.returncode and not stopped:
        sys.exit(f"{argv[0]} exited {proc.returncode} (log {log}):\n{log.read_text(encoding='utf-8')[-3000:]}")
    found = checkpoints(out)
    step, where = found[-1] if found else (0, None)
    return TrainResult(where, step, cpu, wall, stopped)


def steerable_checkpoints(out: Path) -> list[tuple[int, Path]]:
    """(step, folder) of each complete checkpoint `steerable train` wrote under `out`, oldest first."""
    found = []
    for where in (out / "checkpoints").glob("step_*"):
        match = re.fullmatch(r"step_(\d+)", where.name)
        if match and (where / "model.safetensors").is_file() and (where / "config.json").is_file():
            found.append((int(match.group(1)), where))
    return sorted(found)


def lerobot_checkpoints(out: Path) -> list[tuple[int, Path]]:
    """(step, pretrained_model folder) of each complete checkpoint `lerobot-train` wrote under `out` (its
    training state is written last, so a folder that has it is whole), oldest first."""
    found = []
    for where in (out / "checkpoints").iterdir() if (out / "checkpoints").is_dir() else ():
        if where.name.isdigit() and (where / "training_state").is_dir() and (where / "pretrained_model").is_dir():
            found.append((int(where.name), where / "pretrained_model"))
    return sorted(found)


def steerable_train_argv(bin_dir: Path, dataset: Path, out: Path, *, steps: int, save_every: int,
                         extra: Iterable[str] = ()) -> list[str]:
    """`steerable train` with its defaults (the tiny backbone, recipe `hierarchical`), one thread, no
    held-out evaluation in the way (the benchmark scores the checkpoint itself)."""
    return [str(bin_dir / "steerable"), "train", "--dataset", str(dataset), "--output_dir", str(out), "--steps",
            str(steps), "--save_every", str(save_every), "--eval_every", str(10 * steps), "--threads", "1",
            "--no_progress", *extra]


def lerobot_train_argv(bin_dir: Path, kind: str, dataset: Path, out: Path, *, steps: int, save_every: int,
                       batch_size: int, device: str = "cpu", vlm: Path | None = None,
                       extra: Iterable[str] = ()) -> list[str]:
    """`lerobot-train --policy.type=KIND` with the small configuration of `LEROBOT_POLICIES`."""
    argv = [str(bin_dir / "lerobot-train"), f"--policy.type={kind}", f"--dataset.repo_id=local/{dataset.name}",
            f"--dataset.root={dataset}", f"--steps={steps}", f"--batch_size={batch_size}", "--num_workers=0",
            f"--save_freq={save_every}", f"--log_freq={max(1, save_every)}", f"--output_dir={out}",
            f"--policy.device={device}", "--policy.push_to_hub=false", "--wandb.enable=false",
            *LEROBOT_POLICIES[kind]]
    if kind == "smolvla":
        if vlm is None:
            raise ValueError("smolvla needs the tiny VLM folder")
        argv.append(f"--policy.vlm_model_name={vlm}")
    return [*argv, *extra]


@dataclass
class Score:
    """Successes over the episodes scored, and the wall seconds the evaluation took."""

    successes: int
    episodes: int
    wall_s: float

    @property
    def rate(self) -> float:
        return self.successes / max(self.episodes, 1)


def score(outcomes: Mapping[int, bool], seeds: Iterable[int], wall_s: float) -> Score:
    """The outcomes of `seeds` alone (an evaluation may have run seeds the benchmark does not score, e.g.
    scenes a fixed task does not fit); a seed with no outcome is a failure."""
    chosen = list(seeds)
    return Score(sum(bool(outcomes.get(s, False)) for s in chosen), len(chosen), wall_s)


def seed_blocks(seeds: Iterable[int]) -> list[tuple[int, int]]:
    """(first seed, count) of each run of consecutive seeds: one evaluation per block, so seeds between them
    (scenes a fixed task does not fit) never run."""
    blocks: list[tuple[int, int]] = []
    for seed in sorted(set(seeds)):
        if blocks and blocks[-1][0] + blocks[-1][1] == seed:
            blocks[-1] = (blocks[-1][0], blocks[-1][1] + 1)
        else:
            blocks.append((seed, 1))
    return blocks


def steerable_eval(argv: Sequence[str], seeds: Sequence[int], log: Path) -> Score:
    """`steerable run ARGV --eval_episodes N --seed S --json` over each block of `seeds` (`seed_blocks`): its
    success rate times its episodes, summed (the JSON has no per-seed outcome)."""
    successes, wall = 0, 0.0
    for first, count in seed_blocks(seeds):
        each = log.with_name(f"{log.stem}_{first}{log.suffix}")
        wall += run_logged([*argv, "--eval_episodes", str(count), "--seed", str(first), "--json"], each)
        report = json.loads(each.read_text(encoding="utf-8").strip().splitlines()[-1])
        successes += round(float(report["success_rate"]) * int(report["episodes"]))
    return Score(successes, len(set(seeds)), wall)


def lerobot_eval_seeds(argv: Sequence[str], first_seed: int, out: Path, log: Path
                       ) -> tuple[dict[str, dict[int, bool]], float]:
    """Run `lerobot-eval ARGV --seed=FIRST --output_dir=OUT`: ({task: {seed: success}} from its
    eval_info.json, wall seconds)."""
    shutil.rmtree(out, ignore_errors=True)
    wall = run_logged([*argv, f"--seed={first_seed}", f"--output_dir={out}"], log)
    return read_eval_info(out / "eval_info.json", first_seed), wall


def read_eval_info(path: Path, first_seed: int) -> dict[str, dict[int, bool]]:
    """{task: {seed: success}} of a `lerobot-eval` eval_info.json (task: its task group and id). Each task's
    `successes` are in episode order, and episode i ran with seed `first_seed + i` (LeRobot's rollouts take
    consecutive seeds from `--seed`)."""
    info = json.loads(path.read_text(encoding="utf-8"))
    tasks: dict[str, dict[int, bool]] = {}
    for entry in info.get("per_task", []):
        name = f"{entry.get('task_group', '')}:{entry.get('task_id', 0)}"
        successes = entry.get("metrics", {}).get("successes", [])
        tasks[name] = {first_seed + i: bool(ok) for i, ok in enumerate(successes)}
    return tasks


def lerobot_eval(argv: Sequence[str], seeds: Sequence[int], out: Path, log: Path) -> Score:
    """`lerobot-eval ARGV --seed=S --eval.n_episodes=N` over each block of `seeds`, scored by seed."""
    outcomes: dict[int, bool] = {}
    wall = 0.0
    for first, count in seed_blocks(seeds):
        tasks, took = lerobot_eval_seeds([*argv, f"--eval.n_episodes={count}"], first,
                                         out.with_name(f"{out.name}_{first}"), log.with_name(f"{log.stem}_{first}.log"))
        wall += took
        outcomes.update({seed: ok for each in tasks.values() for seed, ok in each.items()})
    return score(outcomes, seeds, wall)


@dataclass
class Row:
    """One line of the table: a policy, how it was scored, and its figures (None: not measured)."""

    policy: str
    evaluator: str
    result: Score | None
    train: TrainResult | None
    chunk_ms: float | None = None
    same_steps: Score | None = None
    note: str = ""
    train_scenes: Score | None = None  # the same checkpoint on scenes it was trained on (fit, not generalisation)
    extra: dict[str, str] = field(default_factory=dict)


def _rate(result: Score | None) -> str:
    if result is None:
        return "-"
    from steerable.synthetic.replay import wilson_interval

    low, high = wilson_interval(result.successes, result.episodes)
    return f"{result.successes}/{result.episodes} = {result.rate:.2f} ({low:.2f}-{high:.2f})"


def format_table(rows: Sequence[Row], *, same_steps: int | None = None, train_scenes: int | None = None) -> str:
    """A markdown table: success with its 95 % Wilson interval, CPU seconds and steps of training, the
    scored checkpoint's ms per chunk, (when `same_steps`) success after that many steps, and (when
    `train_scenes`) success on that many of the scenes it was trained on."""
    head = ["policy", "evaluated by", "success (95 % CI)", "train CPU s", "steps", "ms / chunk"]
    if same_steps is not None:
        head.append(f"success at {same_steps} steps")
    if train_scenes is not None:
        head.append(f"on {train_scenes} training scenes")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        train = row.train
        cells = [row.policy + (f" ({row.note})" if row.note else ""), row.evaluator, _rate(row.result),
                 f"{train.cpu_s:.0f}" + (" (budget)" if train.stopped else "") if train else "-",
                 str(train.steps) if train else "-", f"{row.chunk_ms:.1f}" if row.chunk_ms is not None else "-"]
        if same_steps is not None:
            cells.append(_rate(row.same_steps))
        if train_scenes is not None:
            cells.append(_rate(row.train_scenes))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def tiny_vlm(python: Path, work: Path) -> Path:
    """The tiny SmolVLM of tests/lerobot (its config and a tokenizer built offline, nothing downloaded) in
    WORK/tiny_vlm, built by the LeRobot venv's `python`; SmolVLA's `--policy.vlm_model_name`."""
    vlm = work / "tiny_vlm"
    if not (vlm / "config.json").is_file():
        code = ("import sys; from pathlib import Path; sys.path.insert(0, 'tests/lerobot'); "
                f"from lerobot_policies import tiny_vlm; tiny_vlm(Path({str(vlm)!r}))")
        run_logged([str(python), "-c", code], work / "tiny_vlm.log")
    return vlm


@dataclass(frozen=True)
class Training:
    """How every policy of a benchmark is trained: the LeRobot venv's commands, the budget and its clock,
    checkpoints every `save_every` steps, `max_steps` given to a budgeted run, LeRobot's batch, the device,
    and flags a benchmark adds to one policy's training (`policy_args`, by policy)."""

    bin_dir: Path
    budget_s: float
    save_every: int
    max_steps: int
    batch_size: int
    device: str = "cpu"
    clock: str = "cpu"
    vlm: Path | None = None
    policy_args: Mapping[str, Sequence[str]] = field(default_factory=dict)


def train_policy(policy: str, data: Path, run: Path, how: Training, *, steps: int | None = None) -> TrainResult:
    """Train `policy` (steerable, or a kind of `LEROBOT_POLICIES`) on `data` into `run` (a fresh folder:
    lerobot-train refuses an existing one): under the budget, or for `steps` steps when given."""
    shutil.rmtree(run, ignore_errors=True)
    total = steps or how.max_steps
    save = min(how.save_every, total)
    budget = None if steps else how.budget_s
    log = run.with_suffix(".train.log")
    if policy == "steerable":
        argv = steerable_train_argv(how.bin_dir, data, run, steps=total, save_every=save,
                                    extra=["--device", how.device, *how.policy_args.get(policy, ())])
        return train_under_budget(argv, run, budget, steerable_checkpoints, log, clock=how.clock)
    argv = lerobot_train_argv(how.bin_dir, policy, data, run, steps=total, save_every=save,
                              batch_size=how.batch_size, device=how.device, vlm=how.vlm,
                              extra=how.policy_args.get(policy, ()))
    return train_under_budget(argv, run, budget, lerobot_checkpoints, log, clock=how.clock)


def chunk_ms(checkpoint: Path, dataset: Path, task: str, repeats: int = 5) -> float:
    """Median milliseconds of one chunk through LeRobot's path (module docstring); in the LeRobot venv."""
    import torch
    from lerobot.configs.policies import PreTrainedConfig
    from lerobot.datasets import LeRobotDataset, LeRobotDatasetMetadata
    from lerobot.policies.factory import make_policy, make_pre_post_processors
    from lerobot.utils.import_utils import register_third_party_plugins

    register_third_party_plugins()
    torch.set_num_threads(1)
    meta = LeRobotDatasetMetadata(f"local/{dataset.name}", root=dataset)
    cfg = PreTrainedConfig.from_pretrained(checkpoint)
    cfg.pretrained_path = str(checkpoint)
    policy = make_policy(cfg, ds_meta=meta)
    pre, _post = make_pre_post_processors(cfg, pretrained_path=str(checkpoint))
    frame = LeRobotDataset(f"local/{dataset.name}", root=dataset, episodes=[0])[0]
    batch = {k: v.unsqueeze(0) for k, v in frame.items() if k.startswith("observation.")}
    batch["task"] = [task]
    n = int(getattr(cfg, "n_action_steps", 1) or 1)
    times = []
    policy.eval()
    with torch.inference_mode():
        for _ in range(repeats + 1):
            policy.reset()
            started = time.perf_counter()
            for _ in range(n):
                policy.select_action(pre(dict(batch)))
            times.append((time.perf_counter() - started) * 1000)
    return sorted(times[1:])[len(times[1:]) // 2]  # the first one warms up


def chunk_ms_in_venv(python: Path, checkpoint: Path, dataset: Path, task: str, log: Path) -> float:
    """`chunk_ms` run by the LeRobot venv's `python`."""
    run_logged([str(python), __file__, "chunk-ms", str(checkpoint), str(dataset), task], log)
    return float(log.read_text(encoding="utf-8").strip().splitlines()[-1])


if __name__ == "__main__":
    if len(sys.argv) != 5 or sys.argv[1] != "chunk-ms":
        sys.exit("usage: python benchmarks/_peers.py chunk-ms CHECKPOINT DATASET TASK")
    print(f"{chunk_ms(Path(sys.argv[2]), Path(sys.argv[3]), sys.argv[4]):.3f}")
