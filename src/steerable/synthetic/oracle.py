"""Oracle language: the ground truth of a synthetic episode written as its language rows.

Persistent rows: a `subtask` row at each true subtask start, a `plan` row there too listing the
steps that remain (the current one first, numbered), and a `memory` row at each completed
subtask saying what is done so far. Event rows: at each redirect, the person's `interjection`
and the robot's spoken reply (a `say` tool call) on the frame where the expert turned; the plan
row of that frame already names the new receptacle. Subtask texts are the commands of
`steerable.synthetic.commands`, so the scripted controller can execute them.
"""

from __future__ import annotations

import numpy as np

from steerable.dataset.writer import EpisodeLanguage
from steerable.language import EventRow, PersistentRow, event_row, persistent_row, speech_row
from steerable.synthetic.commands import CommandError, parse_command
from steerable.synthetic.ground_truth import EpisodeTruth, Interjection
from steerable.synthetic.tasks import TaskSpec

__all__ = [
    "INTERJECTION_PHRASES", "REPLY_PHRASES", "STACK_INTERJECTION_PHRASES", "STACK_REPLY_PHRASES", "episode_language",
    "memory_text", "plan_text",
]

INTERJECTION_PHRASES = (
    "Actually, put it in the {new} instead.",
    "No, not the {old}. Use the {new}.",
    "Wait, the {cube} goes in the {new}.",
    "Change of plan: the {new}, please.",
)
REPLY_PHRASES = (
    "OK, I'll put the {cube} in the {new}.",
    "Sure, the {new} then.",
    "Got it, moving the {cube} to the {new}.",
)
# A stack redirected onto another cube.
STACK_INTERJECTION_PHRASES = (
    "no, put it on the {new} instead",
    "Actually, stack it on the {new}.",
    "Not the {old}, the {new}.",
    "Wait, the {cube} goes on the {new}.",
)
STACK_REPLY_PHRASES = (
    "OK, I'll stack the {cube} on the {new}.",
    "Sure, on the {new} then.",
    "Got it, the {cube} goes on the {new}.",
)


def plan_text(steps: list[str]) -> str:
    """Numbered lines, "1. pick up the red cube\\n2. place the red cube in the blue bin"."""
    return "\n".join(f"{i}. {s}" for i, s in enumerate(steps, 1))


def memory_text(done: list[str]) -> str:
    """What the completed subtasks `done` leave behind, as one sentence."""
    facts: list[str] = []
    holding: str | None = None
    for text in done:
        try:
            cmd = parse_command(text)
        except CommandError:
            facts.append(text)
            continue
        if cmd.kind == "pick":
            holding = cmd.cube
        elif cmd.kind == "place":
            cube = cmd.cube or holding
            facts.append(f"the {cube} is {'on' if cmd.stack else 'in'} the {cmd.target}")
            holding = None
        elif cmd.kind == "push":
            facts.append(f"the {cmd.cube} was pushed {cmd.direction}")
    if holding is not None:
        facts.append(f"holding the {holding}")
    sentence = "; ".join(facts) or "nothing done yet"
    return sentence[0].upper() + sentence[1:] + "."


def episode_language(task: TaskSpec, truth: EpisodeTruth, rng: np.random.Generator) -> EpisodeLanguage:
    """The oracle rows of one episode (`truth` from the same demonstration as `task`)."""
    remaining = [text for step in task.steps for text in step.subtasks]
    redirects: dict[float, Interjection] = {i.time: i for i in truth.interjections}
    stacked = {step.cube for step in task.steps if step.stack}
    persistent: list[PersistentRow] = []
    events: list[tuple[float, EventRow]] = []
    done: list[str] = []
    for k, sub in enumerate(truth.subtasks):
        turn = redirects.get(sub.start)
        if turn is not None:
            remaining[0] = sub.text  # the interrupted placement becomes the new one
            values = {"cube": turn.cube, "old": turn.old_target, "new": turn.new_target}
            asks, replies = ((STACK_INTERJECTION_PHRASES, STACK_REPLY_PHRASES) if turn.cube in stacked
                             else (INTERJECTION_PHRASES, REPLY_PHRASES))
            said = asks[int(rng.integers(len(asks)))].format(**values)
            reply = replies[int(rng.integers(len(replies)))].format(**values)
            events.append((sub.start, event_row(role="user", content=said, style="interjection")))
            events.append((sub.start, speech_row(reply)))
        elif k > 0:
            done.append(truth.subtasks[k - 1].text)
            remaining.pop(0)
            memory = memory_text(done)
            persistent.append(persistent_row(role="assistant", content=memory, style="memory", timestamp=sub.start))
        persistent.append(persistent_row(role="assistant", content=sub.text, style="subtask", timestamp=sub.start))
        plan = plan_text(remaining)
        persistent.append(persistent_row(role="assistant", content=plan, style="plan", timestamp=sub.start))
    return EpisodeLanguage(persistent=persistent, events=events)
