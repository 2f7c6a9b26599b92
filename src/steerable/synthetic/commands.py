"""The one command grammar of the synthetic tabletop: how subtasks are phrased, and how to read them.

The ground-truth subtasks, the oracle language (`--with_language`) and the runtime's scripted
controller all use these phrasings, so a subtask written into a dataset is a command the
simulator can execute. Object names are the world's: cubes `"<color> cube"` (`CUBE_COLORS`),
receptacles `"<color> bin"` or `"left zone"` / `"right zone"` (`RECEPTACLE_COLORS`).

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

Directions are in the table frame as the top camera shows it: `left` (-x), `right` (+x),
`forward` (-y, up in the top image) and `back` (+y, down in the image).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from steerable.synthetic.world import CUBE_COLORS, RECEPTACLE_COLORS

__all__ = [
    "COMMAND_KINDS",
    "CUBE_NAMES",
    "DIRECTIONS",
    "PHRASINGS",
    "RECEPTACLE_NAMES",
    "Command",
    "parse_command",
    "pick_text",
    "place_text",
    "push_text",
]

# direction -> unit vector (dx, dy) in the table frame
DIRECTIONS: dict[str, tuple[float, float]] = {
    "left": (-1.0, 0.0),
    "right": (1.0, 0.0),
    "forward": (0.0, -1.0),
    "back": (0.0, 1.0),
}
CUBE_NAMES: tuple[str, ...] = tuple(f"{color} cube" for color in CUBE_COLORS)
RECEPTACLE_NAMES: tuple[str, ...] = tuple(RECEPTACLE_COLORS)
COMMAND_KINDS = ("pick", "place", "stack", "push", "open", "close", "home")

# (kind, template): the phrasings, in the order `parse_command` tries them.
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


@dataclass(frozen=True)
class Command:
    """A parsed command. `cube` is None for "place it ..." (the held cube); `target` names a
    receptacle (place) or a cube (stack); `direction` is set for push."""

    kind: str
    cube: str | None = None
    target: str | None = None
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


def parse_command(text: str) -> Command | None:
    """The command `text` states (case, punctuation and extra spaces ignored), or None."""
    clean = _normalise(text)
    for kind, pattern in _PATTERNS:
        match = pattern.match(clean)
        if match:
            groups = match.groupdict()
            return Command(kind, groups.get("cube"), groups.get("target"), groups.get("direction"))
    return None
