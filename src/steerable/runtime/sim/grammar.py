"""The small command grammar of the simulator, shared by the scripted planner and controller.

Subtask commands (what a high-level model generates and the scripted controller executes):
  pick up the <cube>                      e.g. "pick up the red cube"
  place it in the <receptacle>            "place it in the blue bin", "place it in the left bin"
  place the <cube> in the <receptacle>    (the cube must be the one held)
  put it on the <cube> / stack it on the <cube>
  open the gripper / close the gripper / go home
A receptacle is named by its name ("yellow bin", "right zone") or by its side of the table
("the left bin", "the right bin", "the top bin", "the bottom bin"). Tasks use the synthetic
dataset's phrasings ("put the red cube in the blue bin, then the green cube in the grey bin",
"stack the red cube on the green cube"); `parse_task` reads them into steps.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from steerable.synthetic.tasks import Step
from steerable.synthetic.world import TABLE_DEPTH, TABLE_WIDTH, Receptacle, Scene

__all__ = [
    "Command",
    "CommandError",
    "parse_command",
    "parse_task",
    "pick_text",
    "place_text",
    "resolve_target",
    "side_of",
]

CommandKind = Literal["pick", "place", "open", "close", "home"]
EXAMPLES = "'pick up the red cube', 'place it in the left bin', 'open the gripper'"


class CommandError(ValueError):
    """A command outside the grammar, or naming something the scene does not have."""


@dataclass(frozen=True)
class Command:
    kind: CommandKind
    cube: str | None = None  # pick: the cube; place: the cube named (None: "it", the held one)
    target: str | None = None  # place: a receptacle name, or a cube name when `stack`
    stack: bool = False


def side_of(rec: Receptacle) -> str:
    """left / right / top / bottom / middle: where a receptacle sits on the table."""
    x, y = rec.center
    if x < TABLE_WIDTH / 3:
        return "left"
    if x > 2 * TABLE_WIDTH / 3:
        return "right"
    return "top" if y < TABLE_DEPTH / 2 else "bottom"


def _clean(text: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"[.!,;:]+\s*$", "", text.strip().lower()))


def resolve_target(ref: str, scene: Scene) -> tuple[str, bool] | None:
    """(name, is_cube) for "blue bin", "left bin", "right zone", "green cube"...; None if unknown."""
    ref = _clean(ref)
    ref = re.sub(r"^(the|a)\s+", "", ref)
    for cube in scene.cubes:
        if ref in (cube.name, cube.name.split()[0]):
            return cube.name, True
    for rec in scene.receptacles:
        if ref == rec.name:
            return rec.name, False
    match = re.fullmatch(r"(left|right|top|bottom)(?: (bin|zone|one|side))?", ref)
    if match:
        kind = match.group(2) if match.group(2) in ("bin", "zone") else None
        hits = [r for r in scene.receptacles if side_of(r) == match.group(1) and (kind is None or r.kind == kind)]
        if len(hits) == 1:
            return hits[0].name, False
    return None


_PICK = re.compile(r"^(?:pick up|pick|grab|grasp|take) (?:the )?(?P<cube>.+?)$")
_PLACE = re.compile(
    r"^(?:place|put|drop|move|stack) (?:(?P<it>it)|(?:the )?(?P<cube>\w+ cube)) "
    r"(?P<prep>in|into|inside|on top of|on|onto) (?P<target>.+)$"
)


def parse_command(text: str, scene: Scene) -> Command:
    """Parse a subtask command against `scene`; raises CommandError with what is wrong."""
    cmd = _clean(text)
    if not cmd:
        raise CommandError("empty command")
    if re.fullmatch(r"(?:open|release) (?:the )?gripper", cmd):
        return Command("open")
    if re.fullmatch(r"close (?:the )?gripper", cmd):
        return Command("close")
    if re.fullmatch(r"(?:go|move|return) (?:back )?(?:to )?home(?: position)?", cmd):
        return Command("home")
    match = _PICK.match(cmd)
    if match:
        found = resolve_target(match.group("cube"), scene)
        if found is None or not found[1]:
            raise CommandError(f"{text!r}: there is no {match.group('cube')!r} to pick up")
        return Command("pick", cube=found[0])
    match = _PLACE.match(cmd)
    if match:
        found = resolve_target(match.group("target"), scene)
        if found is None:
            raise CommandError(f"{text!r}: no receptacle or cube called {match.group('target')!r} here")
        cube = None
        if match.group("cube"):
            named = resolve_target(match.group("cube"), scene)
            if named is None or not named[1]:
                raise CommandError(f"{text!r}: there is no {match.group('cube')!r}")
            cube = named[0]
        return Command("place", cube=cube, target=found[0], stack=found[1])
    raise CommandError(f"cannot parse command {text!r}; the simulator's controller understands e.g. {EXAMPLES}")


def pick_text(cube: str) -> str:
    return f"pick up the {cube}"


def place_text(step: Step) -> str:
    return f"put it on the {step.target}" if step.stack else f"place it in the {step.target}"


_STEP = re.compile(
    r"(?:the )?(?P<cube>\w+ cube) (?P<prep>in|into|on top of|on|onto) (?:the )?(?P<target>\w+ (?:bin|zone|cube))"
)


def parse_task(text: str, scene: Scene) -> tuple[Step, ...]:
    """The steps of a task in the synthetic dataset's phrasings; raises CommandError when none are found."""
    steps: list[Step] = []
    for part in re.split(r",? then |, and |;", _clean(text)):
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
