"""The one command grammar of the synthetic tabletop: how subtasks are phrased, and how to read them.

The ground-truth subtasks, the oracle language (`--with_language`) and the scripted controller
all use these phrasings, so a subtask written into a dataset is a command the simulator can
execute. Object names are the world's: cubes `"<color> cube"` (`CUBE_COLORS`), receptacles
`"<color> bin"` or `"left zone"` / `"right zone"` (`RECEPTACLE_COLORS`).

| kind    | phrasing                                   | example                               |
|---------|--------------------------------------------|---------------------------------------|
| pick    | `pick up the <cube>`                       | pick up the red cube                  |
| place   | `place the <cube> in the <receptacle>`     | place the red cube in the blue bin    |
| place   | `place it in the <receptacle>`             | place it in the left zone             |
| stack   | `place the <cube> on the <cube>`           | place the red cube on the green cube  |
| stack   | `place it on the <cube>`                   | place it on the green cube            |
| push    | `push the <cube> <direction>`              | push the red cube left                |
| open    | `open the gripper`                         |                                       |
| close   | `close the gripper`                        |                                       |
| home    | `go home`                                  |                                       |

A stack is a placement onto a cube: `Command("place", target=<cube>, stack=True)`. Directions are in
the table frame as the top camera shows it: `left` (-x), `right` (+x), `forward` (-y, up in the
top image) and `back` (+y, down in the image).

Given a scene, `parse_command` also reads what a person types: receptacles named by their side of
the table ("the left bin", "the right bin"), colours alone ("the red one"), verbs like put / grab /
stack; every name is resolved against the scene's objects.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Literal, cast, get_args

from steerable.errors import CommandError
from steerable.synthetic.world import (
    CUBE_COLORS,
    RECEPTACLE_COLORS,
    TABLE_DEPTH,
    TABLE_WIDTH,
    Receptacle,
    Scene,
)

__all__ = [
    "COMMAND_KINDS",
    "CUBE_NAMES",
    "DIRECTIONS",
    "DIRECTION_WORDS",
    "NAME_GROUPS",
    "PHRASINGS",
    "RECEPTACLE_NAMES",
    "Command",
    "CommandError",
    "clean_text",
    "parse_command",
    "pick_text",
    "place_text",
    "push_text",
    "resolve_cube",
    "resolve_target",
    "side_of",
]

CommandKind = Literal["pick", "place", "push", "open", "close", "home"]
COMMAND_KINDS: tuple[str, ...] = get_args(CommandKind)

# direction -> unit vector (dx, dy) in the table frame
DIRECTIONS: dict[str, tuple[float, float]] = {
    "left": (-1.0, 0.0),
    "right": (1.0, 0.0),
    "forward": (0.0, -1.0),
    "back": (0.0, 1.0),
}
CUBE_NAMES: tuple[str, ...] = tuple(f"{color} cube" for color in CUBE_COLORS)
RECEPTACLE_NAMES: tuple[str, ...] = tuple(RECEPTACLE_COLORS)
DIRECTION_WORDS = "|".join(DIRECTIONS)  # a regular expression alternative of the direction words
# The simulator's interchangeable names (cubes, places, push directions): `benchmarks/policy_sim.py
# --name_slots` passes them as `--policy.name_slots` (docs/policy.md, "Name slots").
NAME_GROUPS: tuple[tuple[str, ...], ...] = (CUBE_NAMES, RECEPTACLE_NAMES, tuple(DIRECTIONS))

# (kind of phrasing, template): the phrasings, in the order `parse_command` tries them.
PHRASINGS: tuple[tuple[str, str], ...] = (
    ("pick", "pick up the {cube}"),
    ("place", "place the {cube} in the {receptacle}"),
    ("place", "place it in the {receptacle}"),
    ("stack", "place the {cube} on the {target}"),
    ("stack", "place it on the {target}"),
    ("push", "push the {cube} {direction}"),
    ("open", "open the gripper"),
    ("close", "close the gripper"),
    ("home", "go home"),
)
EXAMPLES = "'pick up the red cube', 'place it in the left bin', 'push the red cube left', 'open the gripper'"


@dataclass(frozen=True)
class Command:
    """A parsed command. `cube`: pick/push: the cube; place: the cube named (None: "it", the held
    one). `target`: place: a receptacle, or a cube when `stack`. `direction`: push."""

    kind: CommandKind
    cube: str | None = None
    target: str | None = None
    stack: bool = False
    direction: str | None = None


def pick_text(cube: str) -> str:
    return f"pick up the {cube}"


def place_text(cube: str | None, target: str, stack: bool = False) -> str:
    """`place the <cube> in/on the <target>`; `cube=None` gives the "place it ..." form."""
    what = "it" if cube is None else f"the {cube}"
    return f"place {what} {'on' if stack else 'in'} the {target}"


def push_text(cube: str, direction: str) -> str:
    if direction not in DIRECTIONS:
        raise ValueError(f"unknown push direction {direction!r}: choose from {', '.join(DIRECTIONS)}")
    return f"push the {cube} {direction}"


def _alternatives(names: tuple[str, ...]) -> str:
    return "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))


_SLOTS = {
    "cube": f"(?P<cube>{_alternatives(CUBE_NAMES)})",
    "target": f"(?P<target>{_alternatives(CUBE_NAMES)})",
    "receptacle": f"(?P<target>{_alternatives(RECEPTACLE_NAMES)})",
    "direction": f"(?P<direction>{_alternatives(tuple(DIRECTIONS))})",
}
_PATTERNS = tuple(
    (
        kind,
        re.compile("^" + re.escape(template).replace(r"\{", "{").replace(r"\}", "}").format(**_SLOTS) + "$"),
    )
    for kind, template in PHRASINGS
)


def _normalise(text: str) -> str:
    text = re.sub(r"[^a-z ]+", " ", text.lower())
    text = re.sub(r"\bgray\b", "grey", text)
    return " ".join(text.split())


def _phrased(text: str) -> Command | None:
    """The command of PHRASINGS that `text` states (case, punctuation and extra spaces ignored)."""
    clean = _normalise(text)
    for kind, pattern in _PATTERNS:
        match = pattern.match(clean)
        if match:
            groups = match.groupdict()
            stack = kind == "stack"
            return Command(
                "place" if stack else cast(CommandKind, kind), groups.get("cube"), groups.get("target"),
                stack=stack, direction=groups.get("direction"),
            )
    return None


def side_of(rec: Receptacle) -> str:
    """left / right / top / bottom: where a receptacle sits on the table (as the top camera sees it)."""
    x, y = rec.center
    if x < TABLE_WIDTH / 3:
        return "left"
    if x > 2 * TABLE_WIDTH / 3:
        return "right"
    return "top" if y < TABLE_DEPTH / 2 else "bottom"


def clean_text(text: str) -> str:
    """Lower case, one space between words, no closing punctuation: how commands and tasks are read."""
    return re.sub(r"\s+", " ", re.sub(r"[.!,;:]+\s*$", "", text.strip().lower()))


def resolve_target(ref: str, scene: Scene) -> tuple[str, bool] | None:
    """(name, is_cube) for "blue bin", "left bin", "right zone", "green cube", "red"...; None if unknown."""
    ref = re.sub(r"^(the|a)\s+", "", clean_text(ref))
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


def resolve_cube(ref: str, scene: Scene, text: str) -> str:
    """The scene's cube `ref` names; CommandError (quoting the command `text`) when there is none."""
    found = resolve_target(ref, scene)
    if found is None or not found[1]:
        raise CommandError(f"{text!r}: there is no {ref!r} in this scene")
    return found[0]


def _in_scene(cmd: Command, scene: Scene, text: str) -> Command:
    """`cmd` with its names checked against (and resolved to) the scene's objects."""
    cube = resolve_cube(cmd.cube, scene, text) if cmd.cube else None
    if cmd.kind != "place":
        return replace(cmd, cube=cube)
    assert cmd.target is not None
    found = resolve_target(cmd.target, scene)
    if found is None:
        raise CommandError(f"{text!r}: there is no {cmd.target!r} in this scene")
    return replace(cmd, cube=cube, target=found[0])


_PICK = re.compile(r"^(?:pick up|pick|grab|grasp|take) (?:the )?(?P<cube>.+?)$")
_PLACE = re.compile(
    r"^(?:place|put|drop|move|stack) (?:(?P<it>it)|(?:the )?(?P<cube>\w+(?: cube| one)?)) "
    r"(?P<prep>in|into|inside|on top of|on|onto) (?P<target>.+)$"
)
_PUSH = re.compile(rf"^(?:push|slide|nudge) (?:the )?(?P<cube>.+?) (?:to the )?(?P<direction>{DIRECTION_WORDS})$")


def _typed(cmd: str, scene: Scene, text: str) -> Command | None:
    """What a person types (`cmd` cleaned), resolved against `scene`; None when it is no command."""
    if re.fullmatch(r"(?:open|release) (?:the )?gripper", cmd):
        return Command("open")
    if re.fullmatch(r"close (?:the )?gripper", cmd):
        return Command("close")
    if re.fullmatch(r"(?:go|move|return) (?:back )?(?:to )?home(?: position)?", cmd):
        return Command("home")
    match = _PUSH.match(cmd)
    if match:
        return Command("push", cube=resolve_cube(match.group("cube"), scene, text), direction=match.group("direction"))
    match = _PICK.match(cmd)
    if match:
        return Command("pick", cube=resolve_cube(match.group("cube"), scene, text))
    match = _PLACE.match(cmd)
    if match:
        found = resolve_target(match.group("target"), scene)
        if found is None:
            raise CommandError(f"{text!r}: no receptacle or cube called {match.group('target')!r} here")
        cube = resolve_cube(match.group("cube"), scene, text) if match.group("cube") else None
        return Command("place", cube=cube, target=found[0], stack=found[1])
    return None


def parse_command(text: str, scene: Scene | None = None) -> Command:
    """The command `text` states; raises CommandError saying what is wrong.

    Without a scene, the phrasings of PHRASINGS with the world's object names (what a dataset's
    subtasks hold); with one, also what a person types, every name resolved against the scene.
    """
    cmd = clean_text(text)
    if not cmd:
        raise CommandError("empty command")
    known = _phrased(cmd)
    if known is not None:
        return known if scene is None else _in_scene(known, scene, text)
    typed = _typed(cmd, scene, text) if scene is not None else None
    if typed is None:
        raise CommandError(f"cannot parse command {text!r}; the simulator's controller understands e.g. {EXAMPLES}")
    return typed
