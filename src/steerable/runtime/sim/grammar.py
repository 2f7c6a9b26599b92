"""The simulator's command grammar: the synthetic tabletop's phrasings, plus what operators say.

Subtask commands are parsed with `steerable.synthetic.commands` first (the one list of phrasings the
synthetic dataset, its oracle language and this controller share: `pick up the red cube`, `place it
in the blue bin`, `place it on the green cube`, `push the red cube left`, `open the gripper`,
`close the gripper`, `go home`). On top of it the controller accepts what a person types: receptacles
named by their side of the table ("the left bin", "the right bin"), colours alone ("the red one"),
and verbs like put / grab / stack. Tasks use the synthetic dataset's task phrasings ("put the red
cube in the blue bin, then the green cube in the grey bin", "stack the red cube on the green cube",
"push the red cube left"); `parse_task` reads them into steps.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from steerable.synthetic import commands as canonical
from steerable.synthetic.tasks import Step
from steerable.synthetic.world import TABLE_DEPTH, TABLE_WIDTH, Receptacle, Scene

__all__ = [
    "Command",
    "CommandError",
    "parse_command",
    "parse_task",
    "resolve_target",
    "side_of",
    "step_commands",
]

CommandKind = Literal["pick", "place", "push", "open", "close", "home"]
EXAMPLES = "'pick up the red cube', 'place it in the left bin', 'push the red cube left', 'open the gripper'"
_DIRECTIONS = "|".join(canonical.DIRECTIONS)


class CommandError(ValueError):
    """A command outside the grammar, or naming something the scene does not have."""


@dataclass(frozen=True)
class Command:
    kind: CommandKind
    cube: str | None = None  # pick/push: the cube; place: the cube named (None: "it", the held one)
    target: str | None = None  # place: a receptacle name, or a cube name when `stack`
    stack: bool = False
    direction: str | None = None  # push


def side_of(rec: Receptacle) -> str:
    """left / right / top / bottom: where a receptacle sits on the table (as the top camera sees it)."""
    x, y = rec.center
    if x < TABLE_WIDTH / 3:
        return "left"
    if x > 2 * TABLE_WIDTH / 3:
        return "right"
    return "top" if y < TABLE_DEPTH / 2 else "bottom"


def _clean(text: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"[.!,;:]+\s*$", "", text.strip().lower()))


def resolve_target(ref: str, scene: Scene) -> tuple[str, bool] | None:
    """(name, is_cube) for "blue bin", "left bin", "right zone", "green cube", "red"...; None if unknown."""
    ref = re.sub(r"^(the|a)\s+", "", _clean(ref))
    ref = re.sub(r"\s+one$", "", ref)
    for cube in scene.cubes:
        if ref in (cube.name, cube.name.split()[0]):
            return cube.name, True
    for rec in scene.receptacles:
        if ref == rec.name:
            return rec.name, False
    match = re.fullmatch(r"(left|right|top|bottom)(?: (bin|zone|side))?", ref)
    if match:
        kind = match.group(2) if match.group(2) in ("bin", "zone") else None
        hits = [r for r in scene.receptacles if side_of(r) == match.group(1) and (kind is None or r.kind == kind)]
        if len(hits) == 1:
            return hits[0].name, False
    return None


def _cube(ref: str, scene: Scene, text: str) -> str:
    found = resolve_target(ref, scene)
    if found is None or not found[1]:
        raise CommandError(f"{text!r}: there is no {ref!r} in this scene")
    return found[0]


_PICK = re.compile(r"^(?:pick up|pick|grab|grasp|take) (?:the )?(?P<cube>.+?)$")
_PLACE = re.compile(
    r"^(?:place|put|drop|move|stack) (?:(?P<it>it)|(?:the )?(?P<cube>\w+(?: cube| one)?)) "
    r"(?P<prep>in|into|inside|on top of|on|onto) (?P<target>.+)$"
)
_PUSH = re.compile(rf"^(?:push|slide|nudge) (?:the )?(?P<cube>.+?) (?:to the )?(?P<direction>{_DIRECTIONS})$")


def _from_canonical(cmd: canonical.Command, scene: Scene, text: str) -> Command:
    if cmd.kind in ("open", "close", "home"):
        return Command(cmd.kind)  # type: ignore[arg-type]
    cube = _cube(cmd.cube, scene, text) if cmd.cube else None
    if cmd.kind == "pick":
        return Command("pick", cube=cube)
    if cmd.kind == "push":
        return Command("push", cube=cube, direction=cmd.direction)
    assert cmd.target is not None
    found = resolve_target(cmd.target, scene)
    if found is None:
        raise CommandError(f"{text!r}: there is no {cmd.target!r} in this scene")
    return Command("place", cube=cube, target=found[0], stack=cmd.kind == "stack")


def parse_command(text: str, scene: Scene) -> Command:
    """Parse a subtask command against `scene`; raises CommandError with what is wrong."""
    cmd = _clean(text)
    if not cmd:
        raise CommandError("empty command")
    known = canonical.parse_command(cmd)
    if known is not None:
        return _from_canonical(known, scene, text)
    if re.fullmatch(r"(?:open|release) (?:the )?gripper", cmd):
        return Command("open")
    if re.fullmatch(r"close (?:the )?gripper", cmd):
        return Command("close")
    if re.fullmatch(r"(?:go|move|return) (?:back )?(?:to )?home(?: position)?", cmd):
        return Command("home")
    match = _PUSH.match(cmd)
    if match:
        return Command("push", cube=_cube(match.group("cube"), scene, text), direction=match.group("direction"))
    match = _PICK.match(cmd)
    if match:
        return Command("pick", cube=_cube(match.group("cube"), scene, text))
    match = _PLACE.match(cmd)
    if match:
        found = resolve_target(match.group("target"), scene)
        if found is None:
            raise CommandError(f"{text!r}: no receptacle or cube called {match.group('target')!r} here")
        cube = _cube(match.group("cube"), scene, text) if match.group("cube") else None
        return Command("place", cube=cube, target=found[0], stack=found[1])
    raise CommandError(f"cannot parse command {text!r}; the simulator's controller understands e.g. {EXAMPLES}")


def step_commands(step: Step, holding: bool = False) -> list[str]:
    """The subtask commands that perform `step` (in the synthetic phrasings); `holding`: already picked."""
    if step.push:
        return [canonical.push_text(step.cube, step.target)]
    place = canonical.place_text(None, step.target, step.stack)
    return [place] if holding else [canonical.pick_text(step.cube), place]


_STEP = re.compile(
    r"(?:the )?(?P<cube>\w+ cube) (?P<prep>in|into|on top of|on|onto) (?:the )?(?P<target>\w+ (?:bin|zone|cube))"
)
_PUSH_STEP = re.compile(rf"push (?:the )?(?P<cube>\w+ cube) (?P<direction>{_DIRECTIONS})\b")


def parse_task(text: str, scene: Scene) -> tuple[Step, ...]:
    """The steps of a task in the synthetic dataset's phrasings; raises CommandError when none are found."""
    steps: list[Step] = []
    for part in re.split(r",? then |, and (?:finally )?|;", _clean(text)):
        push = _PUSH_STEP.search(part)
        if push is not None:
            steps.append(Step(_cube(push.group("cube"), scene, text), push.group("direction"), push=True))
            continue
        match = _STEP.search(part)
        if match is None:
            continue
        cube = resolve_target(match.group("cube"), scene)
        target = resolve_target(match.group("target"), scene)
        if cube is None or not cube[1] or target is None:
            raise CommandError(f"task {text!r} names an object this scene does not have ({part!r})")
        steps.append(Step(cube[0], target[0], stack=target[1]))
    if not steps:
        raise CommandError(
            f"cannot read task {text!r}; say e.g. 'put the red cube in the blue bin' "
            "or 'stack the red cube on the green cube'"
        )
    return tuple(steps)
