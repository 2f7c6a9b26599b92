"""A runtime session as the CLI runs it: env + models + tools + recorder, operator lines, commands files.

Operator lines (the REPL, `--commands FILE`): plain text is an interjection; `/task TEXT`,
`/ask QUESTION`, `/pause`, `/resume`, `/reset [SEED]`, `/status`, `/quit`, `/help`. An unknown
slash command is refused (it never becomes a task). A commands file holds one line per line,
optionally prefixed with a simulated time (`@2.5s no, the right bin`): a timed line is sent at that
time, an untimed one once the robot is idle; the run ends when the last line was handled and the
robot is idle again. A line the high level cannot carry out in the scene (a task naming an object
the scene lacks) stops a commands file there, naming the file's line; the REPL only warns.
"""

from __future__ import annotations

import re
import signal
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from steerable.control import DescribesScene, RecordsGroundTruth, SeedsForTask
from steerable.errors import ConfigError
from steerable.runtime.chunks import InferenceOptions
from steerable.runtime.environments import EnvSpec, make_env
from steerable.runtime.loop import LoopRates, Runtime, RuntimeEvent
from steerable.runtime.recording import Recorder
from steerable.runtime.stack import StackSpec, build_high, build_low
from steerable.tools import load_tools

__all__ = [
    "HELP",
    "Line",
    "Session",
    "SessionOptions",
    "TimedLine",
    "ctrl_c_deferred",
    "format_event",
    "parse_commands",
    "parse_line",
    "read_commands",
    "status_lines",
]

HELP = """commands:
  <text>            interjection: correct or steer the robot ("no, the right bin")
  /task <text>      a new task ("put the red cube in the blue bin")
  /ask <question>   a question about what the cameras see ("where is the red cube?")
  /pause, /resume   stop the robot where it is / carry on
  /reset [seed]     a new scene (and a new recording episode)
  /status           task, subtask, plan, memory, last speech, loop rates
  /help, /quit"""

LineKind = Literal["task", "interject", "ask", "pause", "resume", "reset", "status", "help", "quit", "empty"]
_SLASH: dict[str, LineKind] = {
    "task": "task", "ask": "ask", "pause": "pause", "p": "pause", "resume": "resume", "reset": "reset",
    "status": "status", "help": "help", "?": "help", "quit": "quit", "exit": "quit", "q": "quit",
}


@dataclass(frozen=True)
class Line:
    kind: LineKind
    text: str = ""


def parse_line(raw: str) -> Line:
    """One operator line; raises ConfigError for an unknown slash command."""
    line = raw.strip()
    if not line:
        return Line("empty")
    if not line.startswith("/"):
        return Line("interject", line)
    head, _, rest = line[1:].partition(" ")
    kind = _SLASH.get(head.lower())
    if kind is None:
        raise ConfigError(f"unknown command /{head}; /help lists the commands")
    rest = rest.strip()
    if len(rest) >= 2 and rest[0] == rest[-1] and rest[0] in "\"'":
        rest = rest[1:-1]
    return Line(kind, rest)


@dataclass(frozen=True)
class TimedLine:
    at: float | None  # simulated seconds; None: once the robot is idle
    line: Line
    number: int
    source: str = ""  # the file it came from ("stdin" when piped)


_TIME = re.compile(r"^@\s*(\d+(?:\.\d+)?)\s*s?\s+(.*)$")


def read_commands(path: Path) -> list[TimedLine]:
    """Parse a commands file; every bad line is reported at once (file:line)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"--commands {path}: cannot read it ({exc.strerror or exc})") from exc
    out = parse_commands(text, str(path))
    if not out:
        raise ConfigError(f"--commands {path}: the file holds no commands")
    return out


def parse_commands(text: str, source: str) -> list[TimedLine]:
    """Commands text (a file, or piped stdin): every bad line is reported at once (`source:line`)."""
    out: list[TimedLine] = []
    problems: list[str] = []
    for number, raw in enumerate(text.splitlines(), 1):
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        at = None
        match = _TIME.match(raw.strip())
        body = raw
        if match:
            at, body = float(match.group(1)), match.group(2)
        elif raw.strip().startswith("@"):
            problems.append(f"{source}:{number}: bad time prefix (write e.g. '@2.5s no, the right bin')")
            continue
        try:
            out.append(TimedLine(at, parse_line(body), number, source))
        except ConfigError as exc:
            problems.append(f"{source}:{number}: {exc}")
    if problems:
        raise ConfigError("; ".join(problems))
    return out


def format_event(event: RuntimeEvent) -> str:
    label = {"speech": "say", "warn": "!"}.get(event.kind, event.kind)
    text = event.text.replace("\n", " | ") or "(cleared)"
    # A model's garbage may hold terminal control characters: never let them reach the screen.
    text = "".join(c if c.isprintable() else "\ufffd" for c in text)
    return f"[{event.time_s:6.1f}s] {label}: {text}"


@dataclass
class SessionOptions:
    stack: StackSpec = field(default_factory=StackSpec)
    env: EnvSpec = field(default_factory=EnvSpec)
    task: str | None = None
    seed: int | None = None  # None: the first scene where the task fits (an env that `SeedsForTask`), else 0
    record: Path | None = None
    tts: str = "text"
    rates: LoopRates = field(default_factory=LoopRates)
    realtime: bool = False
    max_seconds: float = 300.0  # simulated time limit of a --commands run
    inference: InferenceOptions = field(default_factory=InferenceOptions)  # --inference, --rtc.*


class Session:
    """Builds and owns the env, the models, the tools, the runtime and the recorder of one run."""

    def __init__(self, options: SessionOptions, *, out: Callable[[str], None] = print) -> None:
        self.options = options
        self.out = out
        self.env = make_env(options.env, int(round(options.rates.ctrl_hz)))
        try:
            self._start(options)
        except BaseException:
            self.env.close()  # a robot is released on every exit, a failed start included
            raise

    def _start(self, options: SessionOptions) -> None:
        self.seed = options.seed if options.seed is not None else _seed_for(self.env, options.task)
        self.env.reset(self.seed, options.task or "")
        self.scene = self.describe_scene()  # the current scene's line (the REPL panel shows it)
        self.speech_dir = Path(tempfile.mkdtemp(prefix="steerable_say_")) if options.tts != "text" else None
        tools = load_tools({}, tts=options.tts, output_dir=self.speech_dir)
        self.recorder = (
            # On the virtual clock the loop waits for each episode's write (no real time to keep; a failed
            # write stops the session there); a live loop never does.
            Recorder(options.record, fps=self.env.fps, robot_type=self.env.robot_type,
                     state_names=self.env.state_names, camera=self.env.camera_keys[0] if self.env.camera_keys else None,
                     wait=not options.realtime, truth=self.env if isinstance(self.env, RecordsGroundTruth) else None)
            if options.record is not None
            else None
        )
        high, low = build_high(options.stack, self.env), build_low(options.stack, self.env)
        prompts = None
        if high is not None and options.stack.high_level == "policy":  # the VLM planner renders its own
            from steerable.runtime.prompts import RecipePrompts

            prompts = RecipePrompts.load(options.stack.recipe)
        self.runtime = Runtime(
            self.env, low, high, tools=tools, prompts=prompts, rates=options.rates, realtime=options.realtime,
            render=True if self.recorder is not None else None, on_reset=self.reset, inference=options.inference,
        )
        if self.recorder is not None:
            model = f"steerable run: {high.name}" if high is not None else "operator"  # direct task: the words typed
            self.recorder.producers = {"task_aug": "operator", "interjection": "operator", "subtask": model,
                                       "plan": model, "memory": model, "tool_call": model, "vqa": model}
            self.runtime.listeners.append(self.recorder.on_event)
            self.runtime.frame_hooks.append(self.recorder.on_frame)
        self.quit = False
        if options.task is not None:
            self.runtime.submit("task", options.task)

    def describe_scene(self) -> str:
        env = self.env
        what = env.describe_scene() if isinstance(env, DescribesScene) else f"--env {self.options.env.name}"
        return f"scene (seed {self.seed}): {what}"

    def reset(self, text: str) -> None:
        """`/reset [seed]`: a new scene; the task is cleared (and the recording starts a new episode)."""
        try:
            self.seed = int(text) if text else self.seed + 1
        except ValueError:
            self.runtime.emit("warn", f"/reset takes an optional integer seed, got {text!r}")
            return
        self.env.reset(self.seed, "")
        self.runtime.reset_models()
        self.runtime.state.set_task("")
        self.runtime.state.set_mode("paused")
        if self.recorder is not None:
            self.recorder.end_episode()
        self.scene = self.describe_scene()
        self.runtime.emit("info", self.scene)

    def handle(self, line: Line) -> None:
        """Apply one operator line (front-end commands are answered here, the rest go to the runtime)."""
        if line.kind == "empty":
            return
        if line.kind == "help":
            self.out(HELP)
        elif line.kind == "status":
            self.out("\n".join(status_lines(self.runtime)))
        elif line.kind == "quit":
            self.quit = True
        else:
            self.runtime.submit(line.kind, line.text)

    def run_commands(self, lines: list[TimedLine]) -> None:
        """Play `lines` (see the module docstring) and return when done, quit, or out of time."""
        rt = self.runtime
        pending = list(lines)
        limit = self.options.max_seconds
        said: list[TimedLine] = []  # the task and interjection lines played, the last one last

        def finished() -> bool:
            if rt.refused is not None:
                self._refuse(said[-1] if said else None, rt.refused)
            while pending and not self.quit:
                nxt = pending[0]
                ready = rt.clock.now() >= nxt.at if nxt.at is not None else rt.idle and not rt.pending_inputs
                if not ready:
                    break
                if nxt.line.kind in ("task", "interject"):
                    said.append(nxt)
                self.handle(pending.pop(0).line)
            if rt.clock.now() >= limit:
                rt.emit("warn", f"stopping after {limit:g} s (--max_seconds)")
                return True
            return self.quit or (not pending and rt.idle and not rt.pending_inputs)

        rt.run(until=finished)

    def _refuse(self, line: TimedLine | None, why: Exception) -> None:
        """Stop a commands file at the line the high level could not carry out (a bug in the script)."""
        where = "--task: " if line is None else f"{line.source}:{line.number}: " if line.source else ""
        raise ConfigError(f"{where}{why}; {self.describe_scene()} (choose another --seed, or name what this scene "
                          "holds)")

    def final_report(self) -> str:
        """Whether the task is done and, from an env that can say it, where its objects ended up."""
        task = self.runtime.state.task
        if not task:
            return "final: no task"
        where = self.env.final_report(task) if isinstance(self.env, DescribesScene) else ""
        status = "task done" if self.runtime.state.done else "task not done"
        report = f"final ({status}): {where}" if where else f"final ({status})"
        wavs = sorted(self.speech_dir.glob("*.wav")) if self.speech_dir is not None else []
        return report + (f"\nspoken replies: {len(wavs)} wav file(s) in {self.speech_dir}" if wavs else "")

    def close(self) -> Path | None:
        """Stop the robot, close the env, finish the recording; returns the dataset written, if any.

        Ctrl-C while this runs (an impatient second press after the one that stopped the robot) is
        answered with a note instead of interrupting: a half-written recording would be lost.
        """
        with ctrl_c_deferred():
            self.runtime.close()
            self.env.close()
            return self.recorder.close() if self.recorder is not None else None


def _seed_for(env: object, task: str | None) -> int:
    """The env's first scene that fits `task` (when it can search scenes), else 0."""
    return int(env.seed_for_task(task)) if isinstance(env, SeedsForTask) and task else 0


@contextmanager
def ctrl_c_deferred() -> Iterator[None]:
    """Ignore SIGINT (with a note on stderr) inside the block; only the main thread can do this. A way
    out that stops the robot runs in one: a second Ctrl-C there would skip closing the runtime, and
    its threads would then die with the interpreter (an abort, exit status 134, not 130)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def note(signum: int, frame: object) -> None:
        sys.stderr.write("still closing the recording; it is done in a moment\n")

    previous = signal.signal(signal.SIGINT, note)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def status_lines(rt: Runtime) -> list[str]:
    ctx = rt.state.snapshot()
    rates = rt.measured_rates()
    high = rt.high.name if rt.high is not None else "none (direct task)"
    if (waiting := rt.high_level_waiting_s) is not None:
        high += f" (thinking for {waiting:.1f} s)"
    return [
        f"mode: {rt.state.mode}{' (task done)' if rt.state.done else ''}   time: {rt.clock.now():.1f}s",
        f"task: {ctx.task or '(not set)'}",
        f"subtask: {ctx.subtask or '(not set)'}",
        "plan: " + (ctx.plan.replace(chr(10), ' | ') if ctx.plan else "(not set)"),
        f"memory: {ctx.memory or '(not set)'}",
        f"last speech: {rt.state.last_speech or '-'}",
        f"models: high level {high}; low level {rt.low.name}",
        f"rates: control {rates['ctrl_hz']:.1f} Hz, chunks {rates['chunk_hz']:.1f} Hz, "
        f"high level {rates['high_level_hz']:.2f} Hz; dispatched {rt.state.actions_dispatched}, "
        f"discarded chunks {rt.state.chunks_discarded}",
        _inference_line(rt),
    ]


def _inference_line(rt: Runtime) -> str:
    """The chunk inference mode and what it measured (latency, delay in ticks, the queue it starts at)."""
    chunks = rt.chunks
    line = f"inference: {rt.inference.mode}"
    if chunks.stats.latencies:
        latency = sorted(chunks.stats.latencies)[len(chunks.stats.latencies) // 2]
        line += f"; chunk latency {latency * 1000:.0f} ms (median of the last {len(chunks.stats.latencies)})"
        if not chunks.sync:
            line += (f", delay {chunks.delay_ticks()} ticks, next chunk asked at {chunks.lead_ticks()} queued, "
                     f"{chunks.stats.late_actions} late actions dropped")
    return line + ("; the low level does not answer: holding still" if chunks.unavailable else "")
