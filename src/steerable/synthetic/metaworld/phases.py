"""Oracle subtasks of a Meta-World demonstration, read from its scripted policy's own branches.

Each of Meta-World's scripted policies (`metaworld.policies`) picks the hand's next target in a
`_desired_pos` function, one `if/elif` branch per phase: above the object, down onto it, the grasp
wait, on to the goal. Which branch chose a step's target is that step's phase: `BranchTracer` records
the line of the `return` that ran (a trace function on that one function's frames, during the
policy's call only) and numbers it by its rank among the function's `return` statements in the
source. `PHASE_TEXTS` (`steerable.synthetic.metaworld.phase_texts`) names each branch of the tasks
whose branches were read; consecutive steps with one text make one subtask, and a phase of fewer
than `MIN_PHASE_FRAMES` frames (a branch that flickers for a step) joins the one before it.
Tasks without texts, or whose policy's branches no longer match the table, get the task alone.
"""

from __future__ import annotations

import ast
import inspect
import sys
import textwrap
from collections.abc import Callable, Sequence
from types import CodeType, FrameType
from typing import Any

from steerable.dataset.writer import EpisodeLanguage
from steerable.language import PersistentRow, persistent_row
from steerable.synthetic.oracle import plan_text

__all__ = ["MIN_PHASE_FRAMES", "BranchTracer", "episode_language", "phase_spans", "return_lines"]

MIN_PHASE_FRAMES = 3


def return_lines(function: Callable[..., Any]) -> list[int]:
    """The file line of each `return` statement of `function`, in source order (the branch numbers)."""
    code = function.__code__
    tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    # getsource starts at the first decorator, as co_firstlineno does.
    return sorted(node.lineno + code.co_firstlineno - 1 for node in ast.walk(tree) if isinstance(node, ast.Return))


class BranchTracer:
    """Which `return` of a policy's `_desired_pos` ran in each `get_action` call (None: no such function)."""

    def __init__(self, policy: Any) -> None:
        function = getattr(type(policy), "_desired_pos", None)
        self.policy = policy
        self._code: CodeType | None = None
        self.branches = 0
        if function is not None and hasattr(function, "__code__"):
            self._lines = return_lines(function)
            self._code, self.branches = function.__code__, len(self._lines)
        self._last: int | None = None

    def act(self, observation: Any) -> tuple[Any, int | None]:
        """The policy's action for `observation` and the branch that chose its target."""
        if self._code is None:
            return self.policy.get_action(observation), None
        self._last = None
        previous = sys.gettrace()
        sys.settrace(self._on_call)
        try:
            action = self.policy.get_action(observation)
        finally:
            sys.settrace(previous)
        last = self._last
        return action, (self._lines.index(last) if last is not None and last in self._lines else None)

    def _on_call(self, frame: FrameType, event: str, arg: Any) -> Callable[..., Any] | None:
        return self._in_function if frame.f_code is self._code else None

    def _in_function(self, frame: FrameType, event: str, arg: Any) -> Callable[..., Any] | None:
        if event == "return":
            self._last = frame.f_lineno
        return self._in_function


def phase_spans(branches: Sequence[int | None], texts: Sequence[str] | None,
                min_frames: int = MIN_PHASE_FRAMES) -> list[tuple[int, str]]:
    """(first frame, text) of each subtask: runs of one text; a run shorter than `min_frames` joins the
    one before (the first run always counts). Empty when `texts` is None or a branch has no text."""
    if texts is None or not branches or any(b is None or not 0 <= b < len(texts) for b in branches):
        return []
    runs: list[list[Any]] = []  # [first frame, text, length] of each run of one text
    for frame, branch in enumerate(branches):
        text = texts[branch]  # type: ignore[index]  # checked above: no None
        if runs and runs[-1][1] == text:
            runs[-1][2] += 1
        else:
            runs.append([frame, text, 1])
    merged: list[list[Any]] = []
    for run in runs:
        if merged and (run[2] < min_frames or merged[-1][1] == run[1]):
            merged[-1][2] += run[2]  # a flicker, or the phase it interrupted going on
        else:
            merged.append(run)
    return [(int(first), str(text)) for first, text, _ in merged]


def episode_language(spans: Sequence[tuple[int, str]], timestamps: Sequence[float]) -> EpisodeLanguage:
    """The oracle rows of one episode, laid out as the synthetic generator's (`synthetic.oracle`): at each
    subtask's first frame a `subtask` row and a `plan` row of the subtasks left (this one first), and from
    the second on a `memory` row of those done. No spans: no rows (the task alone)."""
    texts = [text for _, text in spans]
    persistent: list[PersistentRow] = []
    for k, (frame, text) in enumerate(spans):
        at = float(timestamps[frame])
        if k:
            done = f"Done: {'; '.join(texts[:k])}."
            persistent.append(persistent_row(role="assistant", content=done, style="memory", timestamp=at))
        persistent.append(persistent_row(role="assistant", content=text, style="subtask", timestamp=at))
        persistent.append(persistent_row(role="assistant", content=plan_text(texts[k:]), style="plan", timestamp=at))
    return EpisodeLanguage(persistent=persistent)

