"""Will LeRobot take this recipe? LeRobot's own load-time rules, applied to plain recipe data.

LeRobot's recipe format is steerable's without the steerable-only keys (`description`, `cameras`,
`route`, a turn's `if_absent`, `${camera:NAME}` variables) and the `last_emitted` resolver, and the
release on PyPI (`LEROBOT_RELEASE`) is stricter in two more ways: every message recipe needs a
`target: true` turn (a component whose only supervision is a `stream: low_level` turn is refused),
and every default binding is resolved on every frame, so the default `vqa`/`vqa_query` (no
`camera=`) stop rendering on a frame with VQA for two cameras.

`check_for_lerobot` needs no LeRobot install. `lerobot_load_error` asks the installed LeRobot
itself, when there is one; the LeRobot half of the test suite checks the two agree.
"""

from __future__ import annotations

import importlib.util
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from steerable.errors import RecipeError
from steerable.recipes._where import KeyPath, format_path
from steerable.recipes.expressions import (
    CAMERA_RE,
    DEFAULT_BINDINGS,
    PLACEHOLDER_RE,
    ROLES,
    STEERABLE_ONLY_RESOLVERS,
    parse_resolver,
)
from steerable.recipes.model import STREAMS

__all__ = [
    "AMBIGUOUS_DEFAULTS",
    "LEROBOT_RELEASE",
    "LeRobotVerdict",
    "check_for_lerobot",
    "lerobot_installed",
    "lerobot_load_error",
]

LEROBOT_RELEASE = "0.6.1"
# The keys LeRobot's TrainingRecipe and MessageTurn have; any other key is an unexpected argument there.
_RECIPE_KEYS = ("messages", "bindings", "blend", "weight")
_TURN_KEYS = ("role", "content", "stream", "target", "if_present", "tool_calls_from")
_STEERABLE_ONLY = {
    "description": "steerable's description",
    "cameras": "steerable's camera variables",
    "route": "steerable's VQA routing",
}
_STEERABLE_ONLY_TURN = {"if_absent": "steerable's turn condition"}
# Default bindings that match one row per camera: resolved on every frame, they are ambiguous on a
# frame that carries VQA for two cameras unless the component rebinds them with a selector.
AMBIGUOUS_DEFAULTS = ("vqa", "vqa_query")


@dataclass(frozen=True)
class LeRobotVerdict:
    """`refusals`: why LeRobot's `load_recipe` raises; `hazards`: it loads, but rendering it in
    LeRobot stops or reads the wrong rows on some frames."""

    refusals: tuple[str, ...]
    hazards: tuple[str, ...]

    @property
    def accepted(self) -> bool:
        return not self.refusals


def check_for_lerobot(data: Any) -> LeRobotVerdict:
    """Check parsed recipe YAML (plain data, before steerable binds cameras) against LeRobot's rules."""
    if not isinstance(data, Mapping):
        return LeRobotVerdict(("the top level must be a mapping (messages: or blend:)",), ())
    check = _Check()
    check.recipe(data, (), top=True)
    if check.loose:
        hazards_on = ", ".join(check.loose)
        check.hazards.append(
            f"{hazards_on}: the default binding(s) vqa/vqa_query have no camera=, and LeRobot {LEROBOT_RELEASE} "
            "resolves every default binding on every frame: on a frame with VQA for two cameras it stops "
            "with 'Ambiguous resolver'"
        )
    if any(CAMERA_RE.search(text) for text in _strings(data)):
        check.hazards.append(
            "`${camera:NAME}` is steerable's camera variable: LeRobot reads it as plain text, so those "
            "bindings match no row and those image blocks name no camera"
        )
    return LeRobotVerdict(tuple(check.refusals), tuple(check.hazards))


def lerobot_installed() -> bool:
    return importlib.util.find_spec("lerobot") is not None


def lerobot_load_error(path: str | os.PathLike[str]) -> str | None:
    """What the installed LeRobot's own `load_recipe` says about the file: None when it loads it.

    Raises:
        RecipeError: LeRobot is not installed (check with `lerobot_installed` first).
    """
    if not lerobot_installed():
        raise RecipeError("LeRobot is not installed here: pip install 'steerable[lerobot]'")
    from lerobot.configs.recipe import load_recipe as lerobot_load_recipe

    try:
        lerobot_load_recipe(os.fspath(path))
    except (TypeError, ValueError, KeyError) as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


class _Check:
    """Walks recipe data once, collecting refusals, hazards and the components with loose vqa defaults."""

    def __init__(self) -> None:
        self.refusals: list[str] = []
        self.hazards: list[str] = []
        self.loose: list[str] = []

    def recipe(self, data: Mapping[str, Any], path: KeyPath, *, top: bool) -> None:
        where = f"{format_path(path)}: " if path else ""
        for key in data:
            if key not in _RECIPE_KEYS:
                what = _STEERABLE_ONLY.get(str(key), "not a recipe key")
                self.refusals.append(f"{where}key {key!r} ({what}): LeRobot's recipe has no such field")
        messages, blend = data.get("messages"), data.get("blend")
        if messages is not None and blend is not None:
            self.refusals.append(f"{where}sets both messages and blend; LeRobot takes one of them")
        elif messages is None and blend is None:
            self.refusals.append(f"{where}sets neither messages nor blend")
        if not top and blend is not None:
            self.refusals.append(f"{where}a blend component cannot itself define a blend")
        elif blend is not None:
            self.blend(blend, path + ("blend",))
        if messages is not None:
            self.messages(data, path)

    def blend(self, blend: Any, path: KeyPath) -> None:
        if not isinstance(blend, Mapping) or not blend:
            self.refusals.append(f"{format_path(path)}: a blend needs at least one component (name: recipe)")
            return
        for name, component in blend.items():
            where = path + (str(name),)
            if not isinstance(component, Mapping):
                self.refusals.append(f"{format_path(where)}: a blend component must be a mapping")
                continue
            self.recipe(component, where, top=False)
            if component.get("messages") is None:
                continue
            weight = component.get("weight")
            if weight is None:
                self.refusals.append(f"{format_path(where)}: a blend component needs a weight")
            elif isinstance(weight, bool) or not isinstance(weight, (int, float)) or weight <= 0:
                self.refusals.append(f"{format_path(where)}: a blend component needs a positive weight, got {weight!r}")

    def messages(self, data: Mapping[str, Any], path: KeyPath) -> None:
        where = f"{format_path(path)}: " if path else ""
        messages = data.get("messages")
        if not isinstance(messages, list):
            self.refusals.append(f"{where}messages must be a list of turns")
            return
        bindings = data.get("bindings") or {}
        if not isinstance(bindings, Mapping):
            self.refusals.append(f"{where}bindings must map names to resolver expressions")
            bindings = {}
        known = set(DEFAULT_BINDINGS) | {str(n) for n in bindings} | {"task"}
        targets = 0
        for i, turn in enumerate(messages):
            turn_path = path + ("messages", i)
            unknown = sorted(self.turn(turn, turn_path) - known)
            if unknown:
                self.refusals.append(f"{format_path(turn_path)}: unknown binding(s) {unknown}")
            targets += isinstance(turn, Mapping) and turn.get("target") is True
        if not targets:
            self.refusals.append(
                f"{where}no `target: true` turn: LeRobot {LEROBOT_RELEASE} refuses a message recipe without "
                "one (a `stream: low_level` turn alone does not count)"
            )
        for name, expr in bindings.items():
            where_binding = format_path(path + ("bindings", str(name)))
            try:
                call = parse_resolver(expr)
            except RecipeError as exc:
                self.hazards.append(f"{where_binding}: LeRobot cannot resolve it: {exc}")
                continue
            if call.resolver in STEERABLE_ONLY_RESOLVERS:
                self.hazards.append(
                    f"{where_binding}: {call.resolver} is steerable's resolver; LeRobot {LEROBOT_RELEASE} has no "
                    "such resolver and stops rendering this component"
                )
        if not all(_has_selector(bindings.get(n)) for n in AMBIGUOUS_DEFAULTS):
            self.loose.append(format_path(path) or "the recipe")

    def turn(self, turn: Any, path: KeyPath) -> set[str]:
        """Refusals of one turn; returns the binding names it references."""
        where = format_path(path)
        if not isinstance(turn, Mapping):
            self.refusals.append(f"{where}: a turn must be a mapping")
            return set()
        for key in turn:
            if key not in _TURN_KEYS:
                what = f" ({_STEERABLE_ONLY_TURN[key]})" if key in _STEERABLE_ONLY_TURN else ""
                self.refusals.append(f"{where}: key {key!r}{what} is not a turn field ({', '.join(_TURN_KEYS)})")
        if turn.get("role") not in ROLES:
            self.refusals.append(f"{where}: role {turn.get('role')!r} is not one of {', '.join(ROLES)}")
        stream = turn.get("stream")
        if stream is None:
            self.refusals.append(f"{where}: no stream (high_level or low_level)")
        elif stream not in STREAMS:
            self.refusals.append(f"{where}: stream {stream!r} is not one of {', '.join(STREAMS)}")
        content = turn.get("content")
        names = {str(turn[k]) for k in ("if_present", "tool_calls_from") if turn.get(k) is not None}
        if content is None:
            if turn.get("tool_calls_from") is None:
                self.refusals.append(f"{where}: no content (and no tool_calls_from)")
        elif isinstance(content, str):
            names |= set(PLACEHOLDER_RE.findall(content))
        elif isinstance(content, list):
            for block in content:
                if not isinstance(block, Mapping) or "type" not in block:
                    self.refusals.append(f"{where}: a content block must be a mapping with a `type`")
                    continue
                names |= {n for v in block.values() if isinstance(v, str) for n in PLACEHOLDER_RE.findall(v)}
        else:
            self.refusals.append(f"{where}: content must be text or a list of blocks")
        return names


_SELECTOR_RE = re.compile(r"\b(camera|tool_name)\s*=")


def _has_selector(expr: Any) -> bool:
    """A declared vqa binding that tells cameras apart (or matches nothing), so it cannot be ambiguous."""
    return isinstance(expr, str) and _SELECTOR_RE.search(expr) is not None


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
