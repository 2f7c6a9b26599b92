"""Meta-World's oracle subtasks (#36): the branch of a scripted policy's `_desired_pos` that chose each step,
runs of one named phase as subtasks (a flicker joins the phase it interrupts), and the subtask, plan and
memory rows laid out as the synthetic oracle's. No `metaworld` needed: a policy of the same shape stands in."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from steerable.errors import ConfigError
from steerable.synthetic.metaworld import BranchTracer, MetaWorldTasks, episode_language, phase_spans


class TwoPhasePolicy:
    """Shaped like metaworld's policies: `get_action` moves towards `_desired_pos`, chosen by branches."""

    @staticmethod
    def _desired_pos(o_d: dict[str, Any]) -> np.ndarray:
        if o_d["far"]:
            return np.array([0.0, 0.0, 0.1])
        elif o_d["high"]:
            return np.array([0.0, 0.0, 0.0])
        else:
            return np.array([1.0, 0.0, 0.0])

    def get_action(self, obs: np.ndarray) -> np.ndarray:
        target = self._desired_pos({"far": obs[0] > 0.5, "high": obs[1] > 0.5})
        return np.append(target, 0.0)


def test_the_tracer_names_the_return_that_chose_each_step() -> None:
    tracer = BranchTracer(TwoPhasePolicy())
    assert tracer.branches == 3
    picked = [tracer.act(np.array(obs))[1] for obs in ([1.0, 1.0], [0.0, 1.0], [0.0, 0.0], [1.0, 0.0])]
    assert picked == [0, 1, 2, 0]
    action, _ = tracer.act(np.array([0.0, 0.0]))
    assert action.tolist() == [1.0, 0.0, 0.0, 0.0]  # the policy's own action, untouched


def test_a_policy_without_branches_has_no_phase() -> None:
    class Direct:
        def get_action(self, obs: np.ndarray) -> np.ndarray:
            return obs

    tracer = BranchTracer(Direct())
    assert tracer.branches == 0 and tracer.act(np.zeros(2))[1] is None


def test_spans_are_runs_of_one_text_and_flickers_join_the_phase_they_interrupt() -> None:
    texts = ("move above the puck", "lower the gripper to the puck", "push the puck to the goal")
    branches = [0] * 5 + [1] * 4 + [2] + [1] * 3 + [2] * 6
    assert phase_spans(branches, texts) == [(0, texts[0]), (5, texts[1]), (13, texts[2])]
    # Two branches with one text make one subtask; the first run counts however short.
    assert phase_spans([0, 1, 1, 1, 2, 2, 2], ("a", "b", "b")) == [(0, "a"), (1, "b")]
    assert phase_spans([0, 0, None], texts) == [] and phase_spans([0, 0], None) == []
    assert phase_spans([0, 3], texts) == []  # a branch the table does not name: the task alone


def test_rows_are_the_synthetic_oracles_layout() -> None:
    spans = [(0, "move above the button"), (3, "press the button down")]
    lang = episode_language(spans, [0.0, 0.0125, 0.025, 0.0375, 0.05])
    rows = [(r["style"], r["timestamp"], r["content"]) for r in lang.persistent]
    assert rows == [
        ("subtask", 0.0, "move above the button"),
        ("plan", 0.0, "1. move above the button\n2. press the button down"),
        ("memory", 0.0375, "Done: move above the button."),
        ("subtask", 0.0375, "press the button down"),
        ("plan", 0.0375, "1. press the button down"),
    ]
    assert lang.events == [] and all(r["camera"] is None and r["role"] == "assistant" for r in lang.persistent)
    assert episode_language([], [0.0]).persistent == []


def test_task_names_and_groups_expand_and_a_typo_is_one_line() -> None:
    table = MetaWorldTasks({"push-v3": "Push", "reach-v3": "Reach", "drawer-open-v3": "Open"},
                           {}, {"easy": ["reach-v3", "drawer-open-v3"]})
    assert table.expand("metaworld-push-v3, easy,reach-v3") == ["push-v3", "reach-v3", "drawer-open-v3"]
    with pytest.raises(ConfigError, match="no task 'psh-v3' .did you mean push-v3"):
        table.expand("psh-v3")
    with pytest.raises(ConfigError, match="--tasks is empty"):
        table.expand(" , ")


def test_make_dataset_metaworld_without_lerobot_says_what_to_install(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import importlib.util

    from steerable.cli.main import main

    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None)  # no lerobot, as in a 3.11 venv
    assert main(["make-dataset", "metaworld", "--tasks", "push-v3", "--out", str(tmp_path / "ds")]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "pip install 'steerable[metaworld]'" in lines[0]
    assert not (tmp_path / "ds").exists()
    assert main(["make-dataset", "metaworld", "--help"]) == 0
    shown = capsys.readouterr().out
    assert "--tasks (required)" in shown and "--image_size=64" in shown and "--episodes=10" in shown
