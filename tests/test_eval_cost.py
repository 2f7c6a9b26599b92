"""An evaluation's cost is bounded per simulated second by the loop's rates, whatever the models do.

A weak policy never reports its command done and rewrites the subtask on every call; evaluating it
must cost no more model calls per simulated second than the rates allow (issue 21: 4 episodes of 30
simulated seconds took 831 s). Counted, not timed: speed is measured by `benchmarks/runtime.py`.
"""

from __future__ import annotations

import io
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from steerable.control import ActionChunk, HighLevelRequest, HighLevelUpdate, Observation
from steerable.policy.config import PolicyConfig
from steerable.recipes import load_recipe
from steerable.recipes.live import LivePrompts
from steerable.runtime.environments import ENVIRONMENTS, EnvSpec
from steerable.runtime.evaluation import evaluate
from steerable.runtime.loop import LoopRates, Runtime
from steerable.runtime.report import EvalProgress
from steerable.runtime.stack import StackSpec
from steerable.synthetic.env import SimEnv
from steerable.tools import load_tools


def _log(path: str, line: str) -> None:
    if path:
        with open(path, "a", encoding="utf-8") as f:  # one short line per call: safe from several workers
            f.write(line + "\n")


class RewritingHighLevel:
    """A weak high level: a different subtask on every call (each one a new context)."""

    name = "rewriting (test double)"
    wants_images = False

    def __init__(self, log: str = "") -> None:
        self.log, self.calls = log, 0

    def reset(self) -> None:
        pass

    def update(self, request: HighLevelRequest) -> HighLevelUpdate:
        self.calls += 1
        _log(self.log, "high")
        return HighLevelUpdate(subtask=f"pick up the red cube ({self.calls})")


class WeakController:
    """`LowLevelController` that never reports done (`finish="never"`: one action per chunk, so every
    tick is a chunk boundary), or reports every command done at once (`finish="at_once"`)."""

    name = "weak controller (test double)"
    wants_images = False

    def __init__(self, finish: str = "never", log: str = "", act_s: float = 0.0) -> None:
        self.finish, self.log, self.act_s, self.calls = finish, log, act_s, 0

    def reset(self) -> None:
        pass

    def act(self, observation: Observation, command: str) -> ActionChunk:
        self.calls += 1
        if self.act_s:
            time.sleep(self.act_s)  # a slow model
        import sys

        torch = sys.modules.get("torch")
        _log(self.log, f"low threads={torch.get_num_threads() if torch is not None else 0}")
        if self.finish == "at_once":
            return ActionChunk(np.zeros((0, 4), np.float32), done=True)
        return ActionChunk(np.asarray(observation.state, np.float32).reshape(1, -1))


class WeakEnv(SimEnv):
    """The simulator with the weak models as its "scripted" ones (so `evaluate` builds them by name)."""

    def __init__(self, *, fps: int = 15, finish: str = "never", log: str = "", act_s: float = 0.0,
                 difficulty: str = "easy") -> None:
        super().__init__(fps=fps, difficulty=difficulty)
        self.finish, self.log, self.act_s = finish, log, act_s

    def scripted_planner(self) -> Any:
        return RewritingHighLevel(self.log)

    def scripted_controller(self) -> Any:
        return WeakController(self.finish, self.log, self.act_s)


@pytest.fixture
def weak_env(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setitem(ENVIRONMENTS, "weak", WeakEnv)  # a fork of this process (the pool) sees it too
    return "weak"


def _run(finish: str, rates: LoopRates, seconds: float) -> tuple[int, int]:
    env = SimEnv(fps=int(rates.ctrl_hz))
    drawn = env.reset(3, None)
    high, low = RewritingHighLevel(), WeakController(finish)
    rt = Runtime(env, low, high, tools=load_tools({}, tts="text"), rates=rates)
    rt.submit("task", drawn.task)
    rt.run(max_ticks=int(seconds * rates.ctrl_hz))
    assert rt.stats.high_level_calls == high.calls and rt.stats.chunks == low.calls
    return high.calls, low.calls


@pytest.mark.parametrize("rates", [LoopRates(), LoopRates(ctrl_hz=30, chunk_hz=2, high_level_hz=0.5)])
def test_a_never_done_low_level_costs_what_the_rates_allow(rates: LoopRates) -> None:
    seconds = 30.0
    high, low = _run("never", rates, seconds)
    # periodic updates only (the first one at once); every new subtask infers at once, the rest at chunk_hz
    assert high <= rates.high_level_hz * seconds + 1
    assert low <= rates.chunk_hz * seconds + high + 1
    assert low < rates.ctrl_hz * seconds / 2  # not a chunk per tick


@pytest.mark.parametrize("rates", [LoopRates(), LoopRates(ctrl_hz=30, chunk_hz=2, high_level_hz=0.5)])
def test_commands_done_at_once_do_not_ask_the_high_level_every_tick(rates: LoopRates) -> None:
    """Each reply is a new subtask the controller reports done at once: the updates asked "at once"
    come at most chunk_hz times per second (they came on every tick: ctrl_hz)."""
    seconds = 30.0
    high, low = _run("at_once", rates, seconds)
    assert high <= (rates.high_level_hz + rates.chunk_hz) * seconds + 1
    assert low <= rates.chunk_hz * seconds + high + 1


def _calls(log: Path) -> tuple[int, int, set[str]]:
    lines = log.read_text().splitlines() if log.exists() else []
    threads = {line.split("=", 1)[1] for line in lines if line.startswith("low threads=")}
    return sum(line == "high" for line in lines), sum(line.startswith("low") for line in lines), threads


@pytest.mark.parametrize("workers", [1, 2])
def test_an_evaluation_uses_the_rates_it_is_given_and_one_torch_thread_per_worker(
        weak_env: str, tmp_path: Path, workers: int) -> None:
    torch = pytest.importorskip("torch")
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        log = tmp_path / "calls.log"
        rates = LoopRates(ctrl_hz=15, chunk_hz=2, high_level_hz=0.5)
        report = evaluate(StackSpec(), 2, env=EnvSpec(weak_env, {"log": str(log)}), workers=workers,
                          max_seconds=20, rates=rates)
        assert torch.get_num_threads() == 2  # restored in this process
    finally:
        torch.set_num_threads(before)
    assert [e.sim_seconds for e in report.episodes] == [20.0, 20.0]  # never done: to --max_seconds
    high, low, threads = _calls(log)
    simulated = 2 * 20.0
    assert high <= rates.high_level_hz * simulated + 2
    assert low <= rates.chunk_hz * simulated + high + 2
    assert threads == {"1"}


def test_a_long_episode_shows_progress_before_it_ends(weak_env: str) -> None:
    """Progress in simulated seconds comes from the pool's workers while their episodes run, and
    never after an episode's result."""
    seen: list[tuple[int, float]] = []
    ended: set[int] = set()

    def on_time(seed: int, seconds: float) -> None:
        assert seed not in ended
        seen.append((seed, seconds))

    def on_result(result: Any) -> None:
        ended.add(result.seed)

    # 6 simulated seconds, 30 chunks of 40 ms each: over a second per episode, the watcher sees it run
    evaluate(StackSpec(), 2, env=EnvSpec(weak_env, {"act_s": 0.04}), workers=2, max_seconds=6,
             on_result=on_result, on_time=on_time)
    assert {seed for seed, _ in seen} == {0, 1}
    assert all(0 < s <= 6 for _, s in seen)
    one: list[tuple[int, float]] = []
    evaluate(StackSpec(), 1, env=EnvSpec(weak_env), workers=1, max_seconds=3, on_time=lambda *a: one.append(a))
    assert one == [(0, 1.0), (0, 2.0), (0, 3.0)]  # in one process: after every simulated second


def test_the_progress_line_counts_running_episodes_in_its_eta() -> None:
    out = io.StringIO()
    with EvalProgress(4, max_seconds=30, stream=out, enabled=False) as progress:
        progress.started_at -= 10  # 10 s into the run, no episode finished yet
        progress.on_time(0, 15.0)
        progress.on_time(1, 15.0)
        line = progress.text()
        assert line.startswith("eval: episodes 0/4 (running: 15 s, 15 s of 30 s), 0 succeeded, ")
        assert line.endswith("ETA 30 s")  # one episode's worth done in 10 s, three to go


class RunOnRunner:
    """Stands in for a weak policy's `PolicyRunner`: every text runs to its token budget."""

    cfg = PolicyConfig()
    prompts = LivePrompts(load_recipe("hierarchical"))

    def __init__(self) -> None:
        self.tokens = 0

    def generate(self, chats: Any, observation: Any, generation: Any = None, canonical: bool = False) -> list[Any]:
        from steerable.policy.generation import ParsedReply

        self.tokens += generation.max_new_tokens
        return [ParsedReply("argugh" * generation.max_new_tokens, truncated=True)]


def test_a_policy_whose_text_never_ends_is_asked_less_and_less_often() -> None:
    """Run-on text is a failed call, not an answer: the robot holds still and the loop backs off
    (after 1 s, 2 s, 4 s, then every 5 s), where it asked at the high-level rate before."""
    from steerable.runtime.loop import RETRY_MAX_S
    from steerable.runtime.policy_high_level import PolicyHighLevel

    rates, seconds = LoopRates(), 60.0
    env = SimEnv(fps=int(rates.ctrl_hz))
    drawn = env.reset(3, None)
    runner = RunOnRunner()
    rt = Runtime(env, WeakController(), PolicyHighLevel(runner),
                 tools=load_tools({}, tts="text"), rates=rates)
    events: list[Any] = []
    rt.listeners.append(events.append)
    rt.submit("task", drawn.task)
    rt.run(max_ticks=int(seconds * rates.ctrl_hz))
    period = 1 / rates.high_level_hz
    t, expected = 0.0, 1  # the first call, at 0 s
    while (t := t + min(period * 2 ** (expected - 1), RETRY_MAX_S)) < seconds:
        expected += 1  # failures in a row wait one period, then twice as long each time, up to RETRY_MAX_S
    assert rt.stats.high_level_calls == rt.stats.high_level_failures == expected < seconds * rates.high_level_hz / 3
    assert runner.tokens <= expected * 96  # one plan budget per call: the first text fails it
    warnings = [e.text for e in events if e.kind == "warn"]
    assert len(warnings) == 1 and "did not end within 96 tokens" in warnings[0]
    assert "subtask" not in rt.state.context and rt.stats.chunks == 0  # held still throughout
