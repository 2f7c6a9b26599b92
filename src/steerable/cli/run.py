"""`steerable run`: steer a robot (the simulator) with a task, interjections and questions; evaluate."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from steerable.runtime.display_rerun import RerunDisplay
    from steerable.runtime.session import Session, TimedLine
    from steerable.runtime.settings import RunSettings
    from steerable.runtime.stack import StackSpec

__all__ = ["register"]

USAGE = """usage: steerable run [--task TEXT] [--commands FILE | --eval_episodes N] [--high_level KIND] [...]
       steerable run --replay DATASET [--episodes 0-9] [--json]

Steer a robot in language: a task, interjections ('no, the right bin'), questions (/ask), pause/resume,
spoken replies. Interactive REPL by default; --commands FILE plays a script; --eval_episodes N evaluates
seeded tasks in parallel; --replay DATASET replays a synthetic dataset's recorded actions from each episode's
own scene and checks the outcome. The scripted planner and controller are test doubles for the simulator, not
models. Every option, with its default:
"""


def register(sub: argparse._SubParsersAction) -> None:
    from steerable.cli.flags import add_command

    add_command(
        sub, "run", func=run,
        help="run a language-steered policy in the simulator: REPL, scripted commands, recording, evaluation",
    )


def run(args: argparse.Namespace) -> int:
    from steerable.cli.flags import parse_command
    from steerable.runtime.settings import RunSettings

    cfg = parse_command(RunSettings, args, USAGE)
    if cfg is None:
        return 0
    if cfg.replay is not None:
        return _replay(cfg)
    spec = cfg.stack()
    if cfg.eval_episodes is not None:
        return _evaluate(cfg, spec, cfg.eval_episodes)
    from steerable.runtime.loop import LoopRates
    from steerable.runtime.session import Session, SessionOptions, parse_commands, read_commands

    lines = read_commands(cfg.commands) if cfg.commands is not None else None
    interactive = lines is None and sys.stdin.isatty()
    options = SessionOptions(
        stack=spec, env=cfg.environment(), task=cfg.task, seed=cfg.seed, record=cfg.record, tts=cfg.tts,
        rates=LoopRates(cfg.ctrl_hz, cfg.chunk_hz, cfg.high_level_hz),
        realtime=cfg.realtime or interactive, max_seconds=cfg.max_seconds or 300.0, inference=cfg.inference_options(),
    )
    display = _display(cfg)
    try:
        if lines is None and not interactive:  # piped stdin: read like a commands file, before anything runs
            lines = parse_commands(sys.stdin.read(), "stdin")
        session = Session(options)
        if display is not None:
            display.attach(session.runtime)
        return _drive(session, lines)
    finally:
        if display is not None:
            display.close()


def _display(cfg: RunSettings) -> RerunDisplay | None:
    if cfg.display != "rerun":
        return None
    from steerable.runtime.display_rerun import RerunDisplay

    return RerunDisplay(cfg.display_to)


def _drive(session: Session, lines: list[TimedLine] | None) -> int:
    """Play `lines` (a commands file, piped stdin) and report; None: the interactive REPL."""
    if lines is None:
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
        written = session.close()  # itself deaf to a second Ctrl-C (session.ctrl_c_deferred)
    print(session.final_report())
    if written is not None:
        print(f"recorded: {written}")
    return code


def _eval_difficulty(cfg: RunSettings, spec: StackSpec) -> str | None:
    """`--eval_difficulty`, else the task mix of the synthetic data the policy learned from, else the
    env's default (the simulator's: easy): a policy is scored on held-out seeds of the distribution
    it was trained on. A policy of other data on another env (Meta-World) leaves the env's options alone."""
    if cfg.eval_difficulty:
        return cfg.eval_difficulty
    if "policy" in (spec.high_level, spec.low_level) and spec.policy_path:
        from steerable.policy.checkpoint import trained_on

        found = trained_on(spec.policy_path).get("synthetic_difficulty")
        return str(found) if found else ("easy" if cfg.env == "sim" else None)
    return None


def _replay(cfg: RunSettings) -> int:
    from steerable.progress import ProgressLine
    from steerable.synthetic.replay import open_replay

    assert cfg.replay is not None
    replay = open_replay(cfg.replay, cfg.episodes)
    with ProgressLine("replay", len(replay.episodes)) as progress:  # on stderr: stdout stays the table or JSON
        report = replay.run(on_result=lambda _: progress.advance())
    if cfg.as_json:
        print(json.dumps(report.to_json()))
    else:
        print("\n".join(report.lines()))
    return 0


def _evaluate(cfg: RunSettings, spec: StackSpec, episodes: int) -> int:
    from rich.console import Console

    from steerable.runtime.evaluation import evaluate
    from steerable.runtime.loop import LoopRates
    from steerable.runtime.report import EvalProgress, eval_table

    max_seconds = cfg.max_seconds or 90.0
    # on stderr: stdout stays the table, or one JSON object
    runs = episodes * (2 if cfg.eval_phrasings == "both" else 1)  # both: each seed seen and unseen
    with EvalProgress(runs, max_seconds=max_seconds) as progress:
        report = evaluate(spec, episodes, env=cfg.environment(), seed=cfg.seed or 0, phrasings=cfg.eval_phrasings,
                          interjections=cfg.eval_interjections, workers=cfg.workers,
                          difficulty=_eval_difficulty(cfg, spec), max_seconds=max_seconds,
                          rates=LoopRates(cfg.ctrl_hz, cfg.chunk_hz, cfg.high_level_hz),
                          on_result=progress.on_result, on_time=progress.on_time, inference=cfg.inference_options())
    if cfg.as_json:
        data = report.to_json()
        data.pop("results")
        print(json.dumps(data))
    else:
        Console(highlight=False).print(eval_table(report))
    return 0
