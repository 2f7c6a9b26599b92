"""The scripted planner (a test double): a high-level model for the simulator that reads its state.

It parses the task into steps, picks the next subtask from the privileged world state, keeps a
numbered plan of what remains and a memory of what is done, changes a step's target when the
operator interjects ("no, the right bin"), replies through `say`, and answers simple questions
about the scene. It stands in for a trained VLM; its name says so in every output.
"""

from __future__ import annotations

import re
from dataclasses import replace

from steerable.control import HighLevelRequest, HighLevelUpdate
from steerable.synthetic.commands import resolve_target
from steerable.synthetic.locations import describe_location
from steerable.synthetic.tasks import Step, parse_task, step_commands, step_satisfied
from steerable.synthetic.world import WorldState

__all__ = ["ScriptedPlanner"]


def _numbered(lines: list[str]) -> str:
    return "\n".join(f"{i}. {line}" for i, line in enumerate(lines, 1))


def _fact(step: Step) -> str:
    if step.push:
        return f"The {step.cube} was pushed {step.target}."
    return f"The {step.cube} is {'on' if step.stack else 'in'} the {step.target}."


class ScriptedPlanner:
    """High-level test double for `--env sim` (reads privileged state; never use it as a model)."""

    name = "scripted planner (test double)"
    wants_images = False

    def __init__(self) -> None:
        self.steps: tuple[Step, ...] | None = None
        self.task = ""
        self.start: WorldState | None = None  # the scene when the task was read (pushes are measured from it)

    def reset(self) -> None:
        self.steps = None
        self.task = ""
        self.start = None

    def _steps(self, request: HighLevelRequest, world: WorldState) -> tuple[Step, ...]:
        if self.steps is None or request.context.task != self.task:
            self.task = request.context.task
            self.steps = parse_task(self.task, world.scene)
            self.start = world
        return self.steps

    def _done(self, world: WorldState, step: Step) -> bool:
        return step_satisfied(world, step, self.start)

    def update(self, request: HighLevelRequest) -> HighLevelUpdate:
        obs = request.observation
        world = obs.privileged if obs is not None else None
        if not isinstance(world, WorldState):
            raise TypeError("the scripted planner needs the simulator's privileged state (--env sim)")
        if request.kind == "ask":
            return HighLevelUpdate(answer=self._answer(request.user_text or "", world, request))
        steps = self._steps(request, world)  # CommandError: the runtime reports it and holds still
        speech = None
        if request.kind == "interjection":
            speech = self._interject(request.user_text or "", world)
            steps = self.steps or steps
        return self._progress(world, steps, speech)

    def _progress(self, world: WorldState, steps: tuple[Step, ...], speech: str | None) -> HighLevelUpdate:
        done = [s for s in steps if self._done(world, s)]
        todo = [s for s in steps if s not in done]
        memory = " ".join(_fact(s) for s in done)
        if not todo:
            if world.held is not None:  # all placed but still holding something: let go
                return HighLevelUpdate(subtask="open the gripper", plan="", memory=memory, speech=speech)
            return HighLevelUpdate(subtask="", plan="", memory=memory, speech=speech, task_done=True)
        current = todo[0]
        holding = world.held is not None and world.scene.cubes[world.held].name == current.cube
        remaining = step_commands(current, holding)
        for s in todo[1:]:
            remaining += step_commands(s)
        return HighLevelUpdate(subtask=remaining[0], plan=_numbered(remaining), memory=memory, speech=speech)

    def _interject(self, text: str, world: WorldState) -> str:
        """Apply a correction ("no, the right bin", "put it on the green cube instead"); the reply to say."""
        assert self.steps is not None
        todo = [i for i, s in enumerate(self.steps) if not self._done(world, s) and not s.push]
        if not todo:
            return "There is nothing left to put anywhere."
        index = todo[0]
        step = self.steps[index]
        cleaned = re.sub(r"\b(no|instead|actually|please|wait|sorry|rather|put it|place it|in|into|on|onto)\b", " ",
                         text.lower())
        words = re.sub(r"[^a-z ]", " ", cleaned).split()
        found = None
        for n in (2, 1):  # prefer "right bin" over "right"
            # The last place named wins ("no, not the blue bin, use the grey bin"), and never the one
            # the step already has.
            for k in reversed(range(len(words) - n + 1)):
                ref = " ".join(words[k:k + n])
                hit = resolve_target(ref, world.scene)
                if hit is not None and hit[0] not in (step.cube, step.target):
                    found = hit
                    break
            if found:
                break
        if found is None:
            return f"Sorry, I did not understand {text.strip()!r}; I keep going."
        steps = list(self.steps)
        steps[index] = replace(step, target=found[0], stack=found[1])
        self.steps = tuple(steps)
        prep = "on" if found[1] else "in"
        return f"OK, I will put the {step.cube} {prep} the {found[0]} instead."

    def _answer(self, question: str, world: WorldState, request: HighLevelRequest) -> str:
        q = question.lower()
        for cube in world.scene.cubes:
            if cube.name in q or re.search(rf"\b{cube.name.split()[0]}\b", q):
                return describe_location(world, cube.name)
        if "how many" in q:
            return f"I see {len(world.scene.cubes)} cubes and {len(world.scene.receptacles)} receptacles."
        if "doing" in q or "what are you" in q:
            sub = request.context.subtask
            return f"I am working on: {sub}." if sub else "Nothing right now."
        cubes = ", ".join(c.name for c in world.scene.cubes)
        places = ", ".join(r.name for r in world.scene.receptacles)
        return f"I see the {cubes}; the receptacles are the {places}."
