"""Write a steerable recipe in the form LeRobot's `load_recipe` accepts, and say what that changes.

The export starts from the loaded recipe, so camera variables are already bound to dataset keys
(the recipe's defaults or a `camera_map`). Then, for LeRobot 0.6.1 (`LEROBOT_RELEASE`):

- `description`, `cameras` and `route` are steerable-only keys: the description and the camera
  bindings become comments, `route: vqa` is dropped (LeRobot draws those components by weight only).
- A component whose only supervision is a `stream: low_level` turn (action loss, no text target)
  gets `target: true` on that turn: LeRobot refuses message recipes without a target, and drops
  every rendered sample without one.
- A turn's `if_absent` is dropped (its turn renders on those frames too), and with it the bindings
  only it read that use steerable's `last_emitted` resolver; a turn that reads such a binding
  itself cannot be exported.
- A component that does not read `vqa`/`vqa_query` rebinds them to a selector that matches no row:
  LeRobot resolves every default binding on every frame, and the defaults (no `camera=`) stop
  rendering with "Ambiguous resolver" on a frame that carries VQA for two cameras.

The file is YAML steerable loads as well; its render there differs from the original recipe's only
by those changes.
"""

from __future__ import annotations

import dataclasses
import json
import re
import textwrap
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from steerable.errors import RecipeError
from steerable.recipes.expressions import STEERABLE_ONLY_RESOLVERS, ResolverCall
from steerable.recipes.lerobot_check import AMBIGUOUS_DEFAULTS, LEROBOT_RELEASE
from steerable.recipes.model import MessageTurn, Recipe

__all__ = ["LeRobotExport", "export_for_lerobot"]

# Matches no row: vqa rows never carry a tool call. Keeps the rebinding free of any camera key.
_NO_ROW = {
    "vqa": "emitted_at(t, style=vqa, role=assistant, tool_name=unused)",
    "vqa_query": "emitted_at(t, style=vqa, role=user, tool_name=unused)",
}
_PLAIN = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*$")
_YAML_WORDS = {"true", "false", "yes", "no", "on", "off", "null", "y", "n", "~"}


@dataclass(frozen=True)
class LeRobotExport:
    """`text`: the YAML; `differences`: one line per change from the steerable recipe."""

    text: str
    differences: tuple[str, ...]


def export_for_lerobot(recipe: Recipe, *, name: str) -> LeRobotExport:
    """The LeRobot form of `recipe` (loaded with its cameras bound); `name` is what the header calls it."""
    differences: list[str] = []
    if recipe.description:
        differences.append("`description` is a comment here (LeRobot's recipe has no such field)")
    if recipe.cameras:
        bound = ", ".join(f"{n} -> {k}" for n, k in recipe.cameras.items())
        differences.append(
            f"camera variables are written as dataset keys ({bound}); LeRobot has no `cameras:` "
            "(bind others with --camera_map NAME=observation.images.X)"
        )
    rebound: list[str] = []
    if recipe.blend is not None:
        data: dict[str, Any] = {"blend": {}}
        for component_name, component in recipe.components():
            data["blend"][component_name] = _component(component, component_name, differences, rebound)
    else:
        data = _component(recipe, "", differences, rebound)
        data.pop("weight", None)
    if rebound:
        differences.append(
            f"{', '.join(rebound)}: vqa and vqa_query are rebound to match no row (unread there): LeRobot "
            f"{LEROBOT_RELEASE} resolves every default binding on every frame, and the defaults stop with "
            "'Ambiguous resolver' on a frame with VQA for two cameras"
        )
    differences.append(
        "LeRobot renders with its own rules where steerable's defaults differ (docs/recipes.md, "
        "'Defaults that differ from LeRobot'): `steerable render --compat lerobot` shows its samples"
    )
    return LeRobotExport(_yaml(data, _header(recipe, name, differences)), tuple(differences))


def _component(recipe: Recipe, name: str, differences: list[str], rebound: list[str]) -> dict[str, Any]:
    label = f"blend.{name}" if name else "the recipe"
    out: dict[str, Any] = {}
    if name:
        out["weight"] = recipe.weight
    if recipe.route is not None and name:
        differences.append(
            f"{label}: `route: {recipe.route}` dropped (LeRobot {LEROBOT_RELEASE} has no routing): a frame "
            "with VQA trains it only when the weighted draw picks it, and a draw of it elsewhere is dropped"
        )
    turns = list(recipe.messages or ())
    if any(t.if_absent is not None for t in turns):
        dropped = sorted({str(t.if_absent) for t in turns if t.if_absent is not None})
        turns = [dataclasses.replace(t, if_absent=None) for t in turns]
        differences.append(
            f"{label}: `if_absent: {', '.join(dropped)}` dropped (LeRobot {LEROBOT_RELEASE} has no such turn "
            "condition), so its turns render on those frames too"
        )
    read = frozenset().union(*(t.referenced_bindings for t in turns))
    steerable_only = sorted(n for n, c in recipe.bindings.items() if c.resolver in STEERABLE_ONLY_RESOLVERS)
    still_read = [n for n in steerable_only if n in read]
    if still_read:
        raise RecipeError(
            f"{label}: binding {still_read[0]!r} ({recipe.bindings[still_read[0]]}) uses a resolver LeRobot "
            f"{LEROBOT_RELEASE} does not have, and a turn reads it: this recipe has no LeRobot form"
        )
    bindings = {n: _expression(c) for n, c in recipe.bindings.items() if n not in steerable_only}
    missing = [n for n in AMBIGUOUS_DEFAULTS if n not in read and n not in bindings]
    if missing:
        bindings.update({n: _NO_ROW[n] for n in missing})
        rebound.append(label)
    if bindings:
        out["bindings"] = bindings
    if not any(t.target for t in turns):
        last = max(i for i, t in enumerate(turns) if t.stream == "low_level")
        turns[last] = dataclasses.replace(turns[last], target=True)
        differences.append(
            f"{label}: its low_level turn is also a text target (LeRobot {LEROBOT_RELEASE} needs a target "
            "in every message recipe and drops samples without one), so LeRobot adds a text loss on it"
        )
    out["messages"] = [_turn(t) for t in turns]
    return out


def _expression(call: ResolverCall) -> str:
    """`active_at(t, style=subtask)`: the resolver call as text both parsers read."""
    args = [f"{k}={v}" for k, v in zip(("style", "role", "camera", "tool_name"), call.selector, strict=True) if v]
    if call.resolver in ("nth_prev", "nth_next"):
        args.append(f"offset={call.offset}")
    return f"{call.resolver}({', '.join(['t', *args])})"


def _turn(turn: MessageTurn) -> dict[str, Any]:
    out: dict[str, Any] = {"role": turn.role}
    if turn.content is not None:
        out["content"] = turn.content if isinstance(turn.content, str) else [dict(b) for b in turn.content]
    out["stream"] = turn.stream
    if turn.target:
        out["target"] = True
    for key in ("if_present", "tool_calls_from"):
        if getattr(turn, key) is not None:
            out[key] = getattr(turn, key)
    return out


def _header(recipe: Recipe, name: str, differences: list[str]) -> list[str]:
    lines = [
        f"LeRobot form of steerable recipe `{name}` (`steerable recipes export {name} --lerobot`).",
        f"LeRobot {LEROBOT_RELEASE}'s load_recipe accepts it; steerable loads it too.",
    ]
    if recipe.description:
        lines += textwrap.wrap(f"Description: {recipe.description}", 100)
    lines.append("What differs from the steerable recipe:")
    for difference in differences:
        lines += textwrap.wrap(difference, 100, initial_indent="- ", subsequent_indent="  ")
    return [f"# {line}" for line in lines]


# -- YAML: the built-ins' layout (a turn per line where it fits), every string quoted as needed -------


def _yaml(data: Mapping[str, Any], header: list[str]) -> str:
    lines = list(header)
    _mapping(data, 0, lines)
    return "\n".join(lines) + "\n"


def _mapping(data: Mapping[str, Any], indent: int, lines: list[str]) -> None:
    pad = " " * indent
    for key, value in data.items():
        if key == "messages":
            lines.append(f"{pad}messages:")
            for turn in value:
                _turn_lines(turn, indent + 2, lines)
        elif isinstance(value, Mapping):
            lines.append(f"{pad}{_scalar(key)}:")
            _mapping(value, indent + 2, lines)
        else:
            lines.append(f"{pad}{_scalar(key)}: {_scalar(value)}")


def _turn_lines(turn: Mapping[str, Any], indent: int, lines: list[str]) -> None:
    pad = " " * indent
    if not isinstance(turn.get("content"), list):
        lines.append(f"{pad}- {_flow(turn)}")
        return
    first = True
    for key, value in turn.items():
        lead = f"{pad}- " if first else f"{pad}  "
        first = False
        if key == "content":
            lines.append(f"{lead}content:")
            lines.extend(f"{pad}    - {_flow(block)}" for block in value)
        else:
            lines.append(f"{lead}{key}: {_scalar(value)}")


def _flow(mapping: Mapping[str, Any]) -> str:
    return "{" + ", ".join(f"{_scalar(k)}: {_scalar(v)}" for k, v in mapping.items()) + "}"


def _scalar(value: Any) -> str:
    if isinstance(value, str):
        plain = _PLAIN.match(value) and value.lower() not in _YAML_WORDS
        return value if plain else json.dumps(value, ensure_ascii=False)
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, float):
        text = repr(value)
        return text if "." in text or "e" not in text else text.replace("e", ".0e", 1)
    if isinstance(value, int):
        return str(value)
    return json.dumps(value, ensure_ascii=False)  # a nested value inside a block: JSON is YAML
