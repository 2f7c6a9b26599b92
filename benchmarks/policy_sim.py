"""The tiny policy trained on CPU on simulated episodes, measured closed loop (issue 21).

Every run trains with the default `steerable train` command (tiny model, recipe `hierarchical`) and
evaluates with `steerable run --eval_episodes N --seed 1000`: seeds whose scenes never occur in a
seed-0 dataset (the simulator draws seed s's scene from rng([s, 7]), make-dataset's episode e from
rng([0, e])). Each success rate is printed with its 95 % Wilson interval. Parts (`--parts`):

- `high`: `make-dataset synthetic --with_language --difficulty D` (cameras, no privileged state),
  held-out subtask exact match against the majority class, then the learned high level over the
  scripted controller (plain, with `--eval_interjections`) and the scripted ceiling.
- `cameras`: the same checkpoint as both levels, and its low level under the scripted planner, from
  cameras + proprioception alone (no privileged observation).
- `both`: `make-dataset ... --privileged_state` (the objects' true positions in the state; the
  default `--policy.state_key auto` reads them), then the policy as both levels and as the low
  level under the scripted planner, with `--observation privileged`.
- `language`: the annotation-by-policy table (issue 21, item 5): the same episodes of the `both`
  dataset, language from (a) the oracle (the `both` checkpoint), (b) `steerable annotate` with no
  model (the proprioception annotator), (c) `steerable annotate` through the test server (the
  placeholder annotator, a floor); the same training, the policy as both levels, privileged state.
  `--language` picks the rows (default all three). `--interjection_rate R` (default 0.5, make-dataset's)
  sets how many of those episodes a person redirects mid-way: the oracle's rows say so, while an
  annotator without a model sees no interjection and names the task's place (`--interjection_rate 0`:
  demonstrations that do what their task says). A real VLM's annotations: annotate a copy of
  `WORK/data_privileged_bare` with `--vlm.base_url ...`, train on it with the default command and run
  the same evaluation (`--annotated_dataset DIR` adds it as a row).

`--name_slots` trains every part with `--policy.name_slots` over the simulator's names
(docs/policy.md, "Name slots"); `--train_args` adds `steerable train` flags to every part's training
(e.g. `--train_args "--text_noise 0.3"`: docs/policy.md, "Held-out phrasings"). `--step_check` trains the
`both` part with `--policy.step_check true` and evaluates its checkpoint as both levels with the check and
without it (`run --policy.step_check false`), so the check's effect is read on one training
(docs/policy.md, "Checking a step").
`--eval_phrasings both` runs every evaluation with `run --eval_phrasings both`: each seed once with its
task (and interjection) in the phrasings the training data holds and once in held-out paraphrases
(`steerable.synthetic.phrasings`), printed as two columns, seen | unseen (`--eval_phrasings unseen`:
the held-out ones alone). `--ablations` evaluates the `both` checkpoint again with sampled chunks
(`run --policy.flow_noise 1`) and with the optimizer's weights instead of their moving average (a copy,
`unaveraged`), so the two run-time and checkpoint choices of stop 33 are read on one training
(docs/policy.md, "What made the low level act").

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/policy_sim.py --work /tmp/policy_sim
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/policy_sim.py --work /tmp/policy_sim_real --parts high \\
        --difficulty realistic

Not part of `make test`: it trains for minutes per part.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from steerable.synthetic.replay import wilson_interval

# Evaluation seeds: the simulator draws seed s's scene from rng([s, 7]) and make-dataset's episode e
# from rng([seed, e]), so seeds from 1000 never repeat a training scene of a seed-0 dataset.
EVAL_SEED = 1000
PARTS = ("high", "cameras", "both", "language")
LANGUAGES = ("oracle", "annotated", "placeholder")


def _steerable(*args: str, timeout: float = 7200) -> str:
    cmd = [sys.executable, "-m", "steerable.cli.main", *args]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                            env={**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")})
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(args[:2])} failed:\n{result.stderr[-2000:]}")
    return result.stdout


def _dataset(path: Path, episodes: int, difficulty: str, *flags: str) -> Path:
    if not (path / "meta" / "info.json").is_file():
        _steerable("make-dataset", "synthetic", "--out", str(path), "--episodes", str(episodes), "--difficulty",
                   difficulty, *flags)
    return path


def _train(dataset: Path, out: Path, *extra: str) -> float:
    """Minutes of `steerable train` with the default settings (nan: trained before, reused)."""
    if (out / "checkpoints" / "latest").is_file():
        return float("nan")
    started = time.perf_counter()
    _steerable("train", "--dataset", str(dataset), "--output_dir", str(out), "--no_progress", *extra)
    return (time.perf_counter() - started) / 60


def subtask_accuracy(dataset: Path, checkpoint: Path, max_cases: int) -> dict[str, Any]:
    from steerable.dataset import open_dataset
    from steerable.policy.checkpoint import latest_checkpoint, load_policy, read_training_state
    from steerable.policy.data import PolicyDataset
    from steerable.policy.evaluate import exact_match, text_cases
    from steerable.policy.names import NameSlots
    from steerable.recipes import load_recipe

    ds = open_dataset(dataset)
    where = latest_checkpoint(checkpoint)
    assert where is not None
    state = read_training_state(where)
    loaded = load_policy(where)
    subtask_only = load_recipe("hierarchical").blend["high_level_subtask"]  # type: ignore[index]
    held = PolicyDataset(ds, subtask_only, loaded.model.cfg, loaded.processor.image_size, state["eval_episodes"])
    stride = max(1, len(held) // max_cases)
    slots = NameSlots(loaded.model.cfg.name_slots)  # the component alone has no name to be renamed by

    def item(i: int) -> Any:
        it = held[i]
        if it is not None and slots:
            it["messages"] = slots.canonical(it["messages"])[0]
        return it

    cases = text_cases(item(i) for i in range(0, len(held), stride))
    result: dict[str, Any] = dict(exact_match(loaded.model, loaded.processor, cases))
    # Majority class of the *training* episodes, predicted for every held-out case.
    train_subtasks: Counter[str] = Counter()
    for ep in state["train_episodes"]:
        rows = ds.read_episode(ep, ["language_persistent"]).column("language_persistent")[0].as_py() or []
        train_subtasks.update(r["content"] for r in rows if r["style"] == "subtask")
    top = train_subtasks.most_common(1)[0][0] if train_subtasks else ""
    result["train_majority_baseline"] = sum(c.expected == top for c in cases) / max(1, len(cases))
    return result


def _run(checkpoint: Path, high: str, low: str, args: argparse.Namespace, *extra: str) -> dict[str, Any]:
    out = _steerable("run", "--env", "sim", "--high_level", high, "--low_level", low, "--policy.path",
                     str(checkpoint), "--eval_episodes", str(args.eval_episodes), "--seed", str(EVAL_SEED),
                     "--max_seconds", str(args.max_seconds), "--workers", str(args.workers), "--json",
                     "--eval_phrasings", args.eval_phrasings, *extra)
    return dict(json.loads(out.strip().splitlines()[-1]))


def _rate(report: dict[str, Any]) -> str:
    n = int(report["episodes"])
    k = round(float(report["success_rate"]) * n)
    low, high = wilson_interval(k, n)
    kinds = ", ".join(f"{name} {v['success_rate']:.2f}" for name, v in sorted(report.get("by_kind", {}).items()))
    return f"{k}/{n} = {k / max(n, 1):.2f} (95 % {low:.2f}-{high:.2f}; {kinds})"


def _rates(report: dict[str, Any]) -> str:
    """`_rate`, or with unseen phrasings one column per phrasing: seen | unseen (the drop in points)."""
    shares = report.get("by_phrasing", {})
    if "unseen" not in shares:
        return _rate(report)
    columns = []
    for share, v in shares.items():
        n = int(v["episodes"])
        k = round(float(v["success_rate"]) * n)
        low, high = wilson_interval(k, n)
        columns.append(f"{share} {k}/{n} = {k / max(n, 1):.2f} (95 % {low:.2f}-{high:.2f})")
    if {"seen", "unseen"} <= set(shares):
        drop = 100 * (shares["unseen"]["success_rate"] - shares["seen"]["success_rate"])
        columns.append(f"unseen - seen {drop:+.0f} points")
    return " | ".join(columns)


class Report:
    def __init__(self) -> None:
        self.rows: list[tuple[str, str]] = []
        self.results: dict[str, float] = {}

    def add(self, label: str, value: str) -> None:
        self.rows.append((label, value))
        print(f"{label}: {value}", flush=True)

    def evaluation(self, key: str, label: str, checkpoint: Path, high: str, low: str, args: argparse.Namespace,
                   *extra: str) -> None:
        started = time.perf_counter()
        try:
            report = _run(checkpoint, high, low, args, *extra)
        except SystemExit as exc:
            self.add(label, f"failed: {str(exc).splitlines()[-1][:100]}")
            return
        self.results[key] = float(report.get("success_rate_seen", report["success_rate"]))
        if "success_rate_unseen" in report:
            self.results[f"{key}_unseen"] = float(report["success_rate_unseen"])
        took = time.perf_counter() - started
        self.add(label, f"{_rates(report)}, {report.get('difficulty', '?')} tasks, {took:.0f} s")


def _slot_flags(args: argparse.Namespace) -> tuple[str, ...]:
    """`--train_args`, and `--policy.name_slots` over the simulator's names (docs/policy.md, "Name slots")."""
    extra = tuple(shlex.split(args.train_args))
    if not args.name_slots:
        return extra
    from steerable.synthetic.commands import NAME_GROUPS

    return (*extra, "--policy.name_slots", json.dumps([list(group) for group in NAME_GROUPS]))


def part_high(args: argparse.Namespace, rep: Report) -> Path:
    data = _dataset(args.work / f"data_{args.difficulty}", args.episodes, args.difficulty, "--with_language")
    ckpt = args.work / f"policy_{args.difficulty}"
    minutes = _train(data, ckpt, *_slot_flags(args))
    rep.add(f"train, {args.difficulty}, cameras + proprioception",
            "reused" if minutes != minutes else f"{minutes:.1f} min")
    acc = subtask_accuracy(data, ckpt, args.cases)
    rep.add("held-out subtask exact match", f"{acc['exact_match']:.3f} over {acc['cases']} cases (majority "
            f"{acc['train_majority_baseline']:.3f})")
    rep.results["exact_match"] = float(acc["exact_match"])
    mix = ("--eval_difficulty", args.difficulty)
    rep.evaluation("policy_scripted", "policy high / scripted low", ckpt, "policy", "scripted", args, *mix)
    rep.evaluation("policy_scripted_interjections", "  with --eval_interjections", ckpt, "policy", "scripted", args,
                   *mix, "--eval_interjections")
    rep.evaluation("ceiling", "scripted high / scripted low (ceiling)", ckpt, "scripted", "scripted", args, *mix)
    return ckpt


def part_cameras(args: argparse.Namespace, rep: Report) -> None:
    ckpt = args.work / f"policy_{args.difficulty}"
    if not (ckpt / "checkpoints" / "latest").is_file():
        part_high(args, rep)
    rep.evaluation("cameras_policy_policy", "policy high / policy low, cameras + proprioception", ckpt, "policy",
                   "policy", args, "--eval_difficulty", args.difficulty)
    rep.evaluation("cameras_scripted_policy", "scripted high / policy low, cameras + proprioception", ckpt,
                   "scripted", "policy", args, "--eval_difficulty", args.difficulty)


def _privileged_data(args: argparse.Namespace) -> Path:
    return _dataset(args.work / "data_privileged", args.episodes, "easy", "--with_language", "--privileged_state",
                    "--interjection_rate", str(args.interjection_rate))


def part_both(args: argparse.Namespace, rep: Report) -> Path:
    data = _privileged_data(args)
    ckpt = args.work / ("policy_privileged_checked" if args.step_check else "policy_privileged")
    check = ("--policy.step_check", "true") if args.step_check else ()
    minutes = _train(data, ckpt, *_slot_flags(args), *check)
    rep.add("train, easy, privileged state", "reused" if minutes != minutes else f"{minutes:.1f} min")
    priv = ("--observation", "privileged")
    rep.evaluation("both_policy_policy", "policy high / policy low, privileged state", ckpt, "policy", "policy", args,
                   *priv)
    if args.step_check:
        rep.evaluation("both_policy_policy_unchecked", "  the same without the step check", ckpt, "policy", "policy",
                       args, *priv, "--policy.step_check", "false")
    rep.evaluation("both_scripted_policy", "scripted high / policy low, privileged state", ckpt, "scripted", "policy",
                   args, *priv)
    if args.ablations:
        rep.evaluation("both_sampled", "  both levels, chunks sampled (--policy.flow_noise 1)", ckpt, "policy",
                       "policy", args, *priv, "--policy.flow_noise", "1")
        rep.evaluation("both_scripted_sampled", "  scripted high, chunks sampled (--policy.flow_noise 1)", ckpt,
                       "scripted", "policy", args, *priv, "--policy.flow_noise", "1")
        plain = unaveraged(ckpt, args.work / (ckpt.name + "_unaveraged"))
        if plain is None:
            rep.add("  without the weight average", "the checkpoint keeps no training weights (--ema_decay 0)")
        else:
            rep.evaluation("both_unaveraged", "  both levels, the optimizer's weights (no average)", plain, "policy",
                           "policy", args, *priv)
            rep.evaluation("both_scripted_unaveraged", "  scripted high, the optimizer's weights (no average)", plain,
                           "scripted", "policy", args, *priv)
    return ckpt


def unaveraged(trained: Path, out: Path) -> Path | None:
    """A copy of `trained`'s latest checkpoint that runs with the optimizer's weights instead of their
    moving average (`steerable.policy.averaging`); None when it kept no such weights."""
    import torch
    from safetensors.torch import load_file, save_model

    from steerable.policy.averaging import TRAINING_WEIGHTS
    from steerable.policy.checkpoint import latest_checkpoint, load_policy

    where = latest_checkpoint(trained)
    if where is None or not (where / TRAINING_WEIGHTS).is_file():
        return None
    if not (out / "model.safetensors").is_file():
        shutil.rmtree(out, ignore_errors=True)
        shutil.copytree(where, out, ignore=shutil.ignore_patterns("optimizer*", "trainer_state.json", TRAINING_WEIGHTS))
        loaded = load_policy(where)
        weights = load_file(str(where / TRAINING_WEIGHTS))
        with torch.no_grad():
            for name, param in loaded.model.named_parameters():
                if name in weights:
                    param.copy_(weights[name])
        save_model(loaded.model, str(out / "model.safetensors"))
    return out


def _annotated(args: argparse.Namespace, language: str) -> Path:
    """The privileged episodes without language, annotated by `language`'s annotator."""
    bare = _dataset(args.work / "data_privileged_bare", args.episodes, "easy", "--privileged_state",
                    "--interjection_rate", str(args.interjection_rate))  # the oracle dataset's demonstrations
    out = args.work / f"data_privileged_{language}"
    if (out / "meta" / "info.json").is_file():
        return out
    if language == "annotated":
        _steerable("annotate", "--root", str(bare), "--output_dir", str(out))
        return out
    from steerable.testing.server import TestServer

    with TestServer(latency_s=0.0, capacity=8) as server:
        try:
            _steerable("annotate", "--root", str(bare), "--output_dir", str(out), "--vlm.base_url", server.url,
                       "--vlm.model_id", "test-model", "--allow_failures")
        except SystemExit:
            if not (out / "meta" / "info.json").is_file():
                shutil.rmtree(out, ignore_errors=True)
                raise
    return out


def part_language(args: argparse.Namespace, rep: Report) -> None:
    rows: list[tuple[str, Path]] = []
    for language in args.language.split(","):
        if language == "oracle":
            ckpt = args.work / "policy_privileged"
            if not (ckpt / "checkpoints" / "latest").is_file():
                _train(_privileged_data(args), ckpt, *_slot_flags(args))
        else:
            data = _annotated(args, language)
            ckpt = args.work / f"policy_privileged_{language}"
            _train(data, ckpt, *_slot_flags(args))
        rows.append((language, ckpt))
    if args.annotated_dataset is not None:
        ckpt = args.work / "policy_privileged_given"
        _train(args.annotated_dataset, ckpt, *_slot_flags(args))
        rows.append((f"given: {args.annotated_dataset}", ckpt))
    for language, ckpt in rows:
        rep.evaluation(f"language_{language.split(':')[0]}", f"language {language}: policy / policy, privileged",
                       ckpt, "policy", "policy", args, "--observation", "privileged")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, default=Path("/tmp/policy_sim"))
    parser.add_argument("--parts", default="high,cameras,both", help=f"comma-separated, of {', '.join(PARTS)}")
    parser.add_argument("--episodes", type=int, default=200, help="episodes of each generated dataset")
    parser.add_argument("--eval_episodes", type=int, default=50)
    parser.add_argument("--max_seconds", type=float, default=60.0, help="simulated seconds per evaluation episode")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--cases", type=int, default=200, help="held-out subtask cases")
    parser.add_argument("--difficulty", default="easy", help="task mix of the high/cameras parts (and their eval)")
    parser.add_argument("--train_args", default="", help="more `steerable train` flags for every part, one string")
    parser.add_argument("--name_slots", action=argparse.BooleanOptionalAction, default=False,
                        help="train with --policy.name_slots over the simulator's names")
    parser.add_argument("--step_check", action=argparse.BooleanOptionalAction, default=False,
                        help="train the both part with --policy.step_check, evaluate it with and without the check")
    parser.add_argument("--ablations", action=argparse.BooleanOptionalAction, default=False,
                        help="both part: the same checkpoint again with sampled chunks (--policy.flow_noise 1) and "
                        "with the optimizer's weights instead of their average")
    parser.add_argument("--eval_phrasings", choices=("seen", "unseen", "both"), default="seen",
                        help="every evaluation's --eval_phrasings: both prints seen and unseen columns")
    parser.add_argument("--language", default=",".join(LANGUAGES), help="rows of the language part")
    parser.add_argument("--interjection_rate", type=float, default=0.5,
                        help="share of the privileged datasets' episodes where a person redirects a placement "
                             "(make-dataset's default 0.5; 0: the robot does what the task says)")
    parser.add_argument("--annotated_dataset", type=Path, default=None,
                        help="language part: also a copy of the bare privileged dataset annotated elsewhere")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    parts = [p for p in args.parts.split(",") if p]
    unknown = sorted(set(parts) - set(PARTS))
    if unknown:
        raise SystemExit(f"--parts {unknown}: choose from {', '.join(PARTS)}")
    rep = Report()
    for part in parts:
        {"high": part_high, "cameras": part_cameras, "both": part_both, "language": part_language}[part](args, rep)
    print()
    width = max(len(r[0]) for r in rep.rows) + 2
    print(f"policy_sim ({args.episodes} episodes per dataset, {args.eval_episodes} held-out seeds per run)")
    for label, value in rep.rows:
        print(f"{label:<{width}}{value}")
    print("RESULT " + " ".join(f"{k}={v:.3f}" for k, v in rep.results.items()))


if __name__ == "__main__":
    main()
