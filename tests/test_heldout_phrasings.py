"""Held-out phrasings (issue 35, item 3): paraphrases no synthetic dataset holds, the same task worded
apart, understood by the scripted doubles, and `run --eval_phrasings seen|unseen|both` side by side."""

from __future__ import annotations

import importlib.util
import io
import json
import re
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console

from annotate_helpers import REPO, steerable
from steerable.cli.main import main
from steerable.errors import ConfigError
from steerable.runtime.environments import ENVIRONMENTS, EnvSpec
from steerable.runtime.evaluation import EvalReport, evaluate
from steerable.runtime.report import eval_table
from steerable.runtime.stack import StackSpec
from steerable.synthetic.commands import CUBE_NAMES, DIRECTIONS, RECEPTACLE_NAMES
from steerable.synthetic.difficulty import DIFFICULTIES, get_difficulty
from steerable.synthetic.env import SimEnv, plan_interjection
from steerable.synthetic.generate import recorded_scene
from steerable.synthetic.oracle import INTERJECTION_PHRASES, STACK_INTERJECTION_PHRASES
from steerable.synthetic.phrasings import (
    HELD_OUT_INTERJECTIONS,
    HELD_OUT_STACK_INTERJECTIONS,
    check_phrasings,
    held_out_task,
)
from steerable.synthetic.tasks import parse_task, sample_task
from steerable.synthetic.world import sample_world

_NAMES = re.compile("|".join(re.escape(n) for n in sorted((*CUBE_NAMES, *RECEPTACLE_NAMES), key=len, reverse=True)))


def _skeleton(text: str) -> str:
    """The wording of a task without its objects and directions: what a template leaves."""
    text = _NAMES.sub("X", text)
    return re.sub(rf"\b(?:{'|'.join(DIRECTIONS)})\b", "D", text)


def test_held_out_tasks_name_the_drawn_steps_in_wordings_no_dataset_uses() -> None:
    seen: set[str] = set()
    unseen: set[str] = set()
    for level in DIFFICULTIES:
        for episode in range(150):  # what make-dataset draws, episode by episode
            seen.add(_skeleton(recorded_scene(0, episode, level)[1].text))
        for seed in range(150):
            rng = np.random.default_rng([seed, 7])
            world = sample_world(rng)
            drawn = sample_task(world.scene, rng, get_difficulty(level), world.positions)
            text = held_out_task(drawn.steps, np.random.default_rng([seed, 7, 1]))
            assert parse_task(text, world.scene) == drawn.steps, text  # what the scripted planner executes
            assert parse_task(drawn.text, world.scene) == drawn.steps
            unseen.add(_skeleton(text))
    assert not seen & unseen
    assert len(unseen) >= 9  # several paraphrases per kind, not one


def test_held_out_interjections_are_new_wordings_the_scripted_planner_follows() -> None:
    assert not set(HELD_OUT_INTERJECTIONS) & set(INTERJECTION_PHRASES)
    assert not set(HELD_OUT_STACK_INTERJECTIONS) & set(STACK_INTERJECTION_PHRASES)
    env = SimEnv(phrasings="unseen")
    spec = env.reset(100)
    assert env.world is not None
    planned = [plan_interjection(env.world, spec.steps, s, "unseen") for s in range(3)]
    said = {p[1] for p in planned if p is not None}
    assert len(said) == 3 and said == {env.plan_interjection(s) for s in range(3)}
    with pytest.raises(ConfigError, match="unknown phrasings 'rare': choose seen or unseen"):
        check_phrasings("rare")
    with pytest.raises(ConfigError, match="unknown phrasings"):
        SimEnv(phrasings="rare")


def test_both_runs_each_seed_twice_and_the_scripted_stack_stays_perfect_on_unseen_phrasings() -> None:
    plain = evaluate(StackSpec(), 6, seed=100, interjections=True, workers=2)
    both = evaluate(StackSpec(), 6, seed=100, interjections=True, workers=2, phrasings="both")
    assert [e.phrasing for e in both.episodes] == ["seen", "unseen"] * 6
    seen = [e for e in both.episodes if e.phrasing == "seen"]
    unseen = [e for e in both.episodes if e.phrasing == "unseen"]
    # The seen half is today's evaluation, the unseen half the same tasks worded apart.
    assert [(e.seed, e.task, e.interjection, e.success) for e in seen] == [
        (e.seed, e.task, e.interjection, e.success) for e in plain.episodes
    ]
    assert [e.kind for e in seen] == [e.kind for e in unseen]
    assert all(a.task != b.task and a.interjection != b.interjection for a, b in zip(seen, unseen, strict=True))
    assert all(e.success for e in both.episodes)
    data = both.to_json()
    assert data["episodes"] == 12 and data["phrasings"] == "both" and data["success_rate"] == 1.0
    assert data["success_rate_seen"] == data["success_rate_unseen"] == 1.0
    assert data["by_phrasing"] == {"seen": {"episodes": 6, "success_rate": 1.0},
                                   "unseen": {"episodes": 6, "success_rate": 1.0}}
    assert plain.to_json()["phrasings"] == "seen" and "success_rate_unseen" not in plain.to_json()
    longer = evaluate(StackSpec(), 6, seed=1, interjections=True, workers=2, difficulty="hard", phrasings="unseen")
    assert longer.success_rate == 1.0 and {e.phrasing for e in longer.episodes} == {"unseen"}
    assert {e.kind for e in longer.episodes} & {"push", "3-step", "4-step"}


def _shown(report: EvalReport) -> str:
    console = Console(width=200, record=True, file=io.StringIO())
    console.print(eval_table(report))
    return console.export_text()


def test_the_table_shows_seen_and_unseen_side_by_side() -> None:
    text = _shown(evaluate(StackSpec(), 2, seed=3, workers=1, phrasings="both"))
    assert "--eval_episodes 2 (each seed seen and unseen)" in text
    rows = [line.split("│")[1].strip() for line in text.splitlines() if line.startswith("│")]
    assert rows[-3:] == ["seen phrasings", "unseen phrasings", "unseen - seen"]
    assert "+0.0 points" in text
    assert "phrasings" not in _shown(evaluate(StackSpec(), 1, workers=1))


def test_an_env_without_held_out_phrasings_is_refused_up_front(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(ENVIRONMENTS, "plain", lambda fps: None)
    with pytest.raises(ConfigError, match="--eval_phrasings unseen: --env plain has no held-out phrasings"):
        evaluate(StackSpec(high_level="none"), 1, env=EnvSpec("plain"), phrasings="unseen")
    with pytest.raises(ConfigError, match="--eval_phrasings 'some': choose seen, unseen, both"):
        evaluate(StackSpec(), 1, phrasings="some")


def test_run_eval_phrasings_both_json_and_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    result = steerable("run", "--env", "sim", "--eval_episodes", "2", "--eval_phrasings", "both",
                       "--eval_interjections", "--json", "--workers", "2", timeout=120)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["episodes"] == 4 and data["success_rate_seen"] == data["success_rate_unseen"] == 1.0
    assert "episodes 4/4" in result.stderr  # the progress line counts both wordings
    for args, message in (
        (["--eval_episodes", "1", "--eval_phrasings", "rare"], "--eval_phrasings"),
        (["--eval_phrasings", "unseen"], "--eval_phrasings unseen words the tasks of an evaluation"),
    ):
        assert main(["run", "--env", "sim", *args]) == 2, args
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, err


def test_policy_sim_prints_a_seen_and_an_unseen_column() -> None:
    spec = importlib.util.spec_from_file_location("policy_sim", Path(REPO) / "benchmarks" / "policy_sim.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    line = module._rates({"episodes": 20, "success_rate": 0.75, "by_phrasing": {
        "seen": {"episodes": 10, "success_rate": 0.9}, "unseen": {"episodes": 10, "success_rate": 0.6}}})
    assert line.startswith("seen 9/10 = 0.90 (95 % ") and " | unseen 6/10 = 0.60 (95 % " in line
    assert line.endswith("unseen - seen -30 points")
    assert module._rates({"episodes": 4, "success_rate": 0.5}).startswith("2/4 = 0.50")
