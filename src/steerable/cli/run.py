"""`steerable run`: steer a robot (the simulator) with a task, interjections and questions; evaluate."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from steerable.errors import ConfigError

__all__ = ["register"]


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "run",
        help="run a language-steered policy in the simulator: REPL, scripted commands, recording, evaluation",
        description="Steer a robot in language: a task, interjections ('no, the right bin'), questions (/ask), "
        "pause/resume, spoken replies. Interactive REPL by default; --commands FILE plays a script; "
        "--eval_episodes N evaluates seeded tasks in parallel. The scripted planner and controller are "
        "test doubles for the simulator, not models.",
    )
    p.add_argument("--env", default="sim", choices=("sim",), help="environment (sim: the synthetic tabletop)")
    p.add_argument("--high_level", default="scripted", help="scripted | vlm | policy | none (direct task)")
    p.add_argument("--low_level", default="scripted", help="scripted | policy")
    p.add_argument("--policy.path", dest="policy_path", help="a trained policy checkpoint (--*_level policy)")
    p.add_argument("--observation", default="standard", choices=("standard", "privileged"),
                   help="privileged (simulator only): a policy may read every object's true position "
                        "(observation.environment_state), as trained with make-dataset --privileged_state")
    p.add_argument("--policy.device", dest="policy_device", default="cpu", help="device for the policy")
    p.add_argument("--vlm.base_url", dest="vlm_base_url", help="OpenAI-compatible server for --high_level vlm")
    p.add_argument("--vlm.model_id", dest="vlm_model_id", help="model name on that server")
    p.add_argument("--vlm.timeout_s", "--vlm.request_timeout_s", dest="vlm_timeout_s", type=float, default=30.0, help="deadline per reply")
    p.add_argument("--recipe", help="recipe (builtin name or YAML) laying out the high-level prompt")
    p.add_argument("--task", help="the task to start with")
    p.add_argument("--seed", type=int, help="scene seed (default: the first scene where --task fits, else 0)")
    p.add_argument("--commands", type=Path, metavar="FILE", help="play REPL lines from FILE ('@2.5s text' times)")
    p.add_argument("--record", type=Path, metavar="DIR", help="record the rollout as a LeRobot v3 dataset")
    p.add_argument("--tts", default="text", help="voice of `say`: text | espeak | pocket")
    p.add_argument("--ctrl_hz", type=float, default=15.0, help="action dispatch rate (the simulator's fps)")
    p.add_argument("--chunk_hz", type=float, default=5.0, help="most action-chunk inferences per second")
    p.add_argument("--high_level_hz", type=float, default=1.0, help="periodic high-level update rate")
    p.add_argument("--realtime", action="store_true", help="pace --commands runs at the control rate")
    p.add_argument("--max_seconds", type=float, help="simulated time limit of a run (300) or of each eval episode (90)")
    p.add_argument("--eval_episodes", type=int, metavar="N", help="evaluate N seeded episodes, no person")
    p.add_argument("--eval_interjections", action="store_true", help="interject a target change mid-way")
    p.add_argument("--eval_difficulty", default=None,
                   help="task mix: easy | realistic | hard (as make-dataset; default: the mix a --policy.path "
                        "policy was trained on, else easy)")
    p.add_argument("--workers", type=int, help="evaluation processes (default: one per core)")
    p.add_argument("--json", action="store_true", help="with --eval_episodes: print one JSON object")
    p.add_argument("--display", default="none", choices=("none", "rerun"),
                   help="rerun: stream cameras, language context, events and loop rates to Rerun ([rerun] extra)")
    p.add_argument("--display_to", metavar="URL|FILE.rrd",
                   help="with --display rerun: a running viewer (rerun+http://HOST:9876/proxy) or a file "
                   "(default: spawn a viewer)")
    p.set_defaults(func=run)


def _spec(args: argparse.Namespace) -> Any:
    from steerable.runtime.stack import StackSpec

    vlm: dict[str, Any] = {"timeout_s": args.vlm_timeout_s}
    if args.vlm_base_url:
        vlm["base_url"] = args.vlm_base_url
        vlm["backend"] = "openai"
    if args.vlm_model_id:
        vlm["model_id"] = args.vlm_model_id
    if args.high_level == "vlm" and not args.vlm_base_url:
        raise ConfigError("--high_level vlm needs --vlm.base_url (an OpenAI-compatible server) and --vlm.model_id")
    return StackSpec(
        high_level=args.high_level, low_level=args.low_level, policy_path=args.policy_path,
        device=args.policy_device, vlm=vlm, recipe=args.recipe, fps=int(round(args.ctrl_hz)),
        observation=args.observation,
    )


def _check(args: argparse.Namespace) -> None:
    if args.ctrl_hz <= 0 or args.chunk_hz <= 0 or args.high_level_hz <= 0:
        raise ConfigError("--ctrl_hz, --chunk_hz and --high_level_hz must be positive")
    if args.tts not in ("text", "espeak", "pocket"):
        raise ConfigError(f"--tts {args.tts!r}: choose text, espeak or pocket")
    if args.task is not None and not args.task.strip():
        raise ConfigError("--task is empty: say what the robot should do, e.g. --task 'put the red cube in the blue bin'")
    if args.max_seconds is not None and args.max_seconds <= 0:
        raise ConfigError("--max_seconds must be positive")
    if args.eval_episodes is not None and args.eval_episodes < 1:
        raise ConfigError("--eval_episodes must be at least 1")
    if args.record is not None and args.eval_episodes is not None:
        raise ConfigError("--record records one session; it does not combine with --eval_episodes")
    if args.display != "none" and args.eval_episodes is not None:
        raise ConfigError("--display shows one session; it does not combine with --eval_episodes")
    if args.display_to is not None and args.display == "none":
        raise ConfigError("--display_to says where --display rerun streams to: add --display rerun")


def run(args: argparse.Namespace) -> int:
    _check(args)
    spec = _spec(args)
    if args.eval_episodes is not None:
        return _evaluate(args, spec)
    from steerable.runtime.loop import LoopRates
    from steerable.runtime.session import Session, SessionOptions, parse_commands, read_commands
    from steerable.runtime.sim.search import seed_for_task

    lines = read_commands(args.commands) if args.commands is not None else None
    seed = args.seed if args.seed is not None else seed_for_task(args.task)
    interactive = lines is None and sys.stdin.isatty()
    options = SessionOptions(
        stack=spec, task=args.task, seed=seed, record=args.record, tts=args.tts,
        rates=LoopRates(args.ctrl_hz, args.chunk_hz, args.high_level_hz),
        realtime=args.realtime or interactive, max_seconds=args.max_seconds or 300.0,
    )
    display = _display(args)
    try:
        if lines is None and not interactive:  # piped stdin: read like a commands file, before anything runs
            lines = parse_commands(sys.stdin.read(), "stdin")
        session = Session(options)
        if display is not None:
            display.attach(session.runtime)
        return _drive(session, lines, interactive)
    finally:
        if display is not None:
            display.close()


def _display(args: argparse.Namespace) -> Any:
    if args.display != "rerun":
        return None
    from steerable.runtime.display_rerun import RerunDisplay

    return RerunDisplay(args.display_to)


def _drive(session: Any, lines: Any, interactive: bool) -> int:
    if interactive:
        from steerable.runtime.repl import run_repl

        return run_repl(session)
    from steerable.runtime.session import format_event

    rt = session.runtime
    print(f"high level: {rt.high.name if rt.high else 'none (direct task)'} · low level: {rt.low.name}")
    print(session.describe_scene())
    rt.listeners.append(lambda e: print(format_event(e), flush=True))
    code = 0
    try:
        session.run_commands(lines)
    except KeyboardInterrupt:
        print("interrupted: robot stopped", file=sys.stderr)
        code = 130
    finally:
        written = session.close()
    print(session.final_report())
    if written is not None:
        print(f"recorded: {written}")
    return code


def _eval_difficulty(args: argparse.Namespace, spec: Any) -> str:
    """`--eval_difficulty`, else the task mix of the synthetic data the policy learned from, else easy:
    a policy is scored on held-out seeds of the distribution it was trained on."""
    if args.eval_difficulty:
        return str(args.eval_difficulty)
    if "policy" in (spec.high_level, spec.low_level) and spec.policy_path:
        from steerable.policy.checkpoint import trained_on

        return str(trained_on(spec.policy_path).get("synthetic_difficulty") or "easy")
    return "easy"


def _evaluate(args: argparse.Namespace, spec: Any) -> int:
    from rich.console import Console

    from steerable.runtime.evaluation import evaluate
    from steerable.runtime.report import eval_table

    report = evaluate(spec, args.eval_episodes, seed=args.seed or 0, interjections=args.eval_interjections,
                      workers=args.workers, difficulty=_eval_difficulty(args, spec),
                      max_seconds=args.max_seconds or 90.0)
    if args.json:
        data = report.to_json()
        data.pop("results")
        print(json.dumps(data))
    else:
        Console(highlight=False).print(eval_table(report))
    return 0
