"""Turn plain recipe data (parsed YAML or an in-code dict) into a validated `Recipe`.

This is where keys are checked against the schema (a typo names its key and line), camera
variables are bound to dataset camera keys, and every validation error gets its location. The
recipe type is passed in (`make`): `Recipe.from_dict` calls this module, which imports the turns
only (`steerable.recipes.turns`), so the two modules import each other one way.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import fields
from typing import Any, TypeVar

from steerable.errors import RecipeError
from steerable.recipes._where import KeyPath, Locator, RecipeFieldError, did_you_mean, format_path
from steerable.recipes.expressions import CAMERA_RE, PLACEHOLDER_RE
from steerable.recipes.turns import ROUTES, MessageTurn

__all__ = ["build_recipe"]

log = logging.getLogger(__name__)

R = TypeVar("R")  # the recipe type `make` builds (`steerable.recipes.model.Recipe`)

# `weight` and `route` are accepted at the top level and ignored there (as in the reference).
TOP_KEYS = ("messages", "bindings", "blend", "cameras", "description", "weight", "route")
# `blend` is accepted here only to report a nested blend with its own message.
COMPONENT_KEYS = ("messages", "bindings", "weight", "route", "blend")
TURN_KEYS = tuple(f.name for f in fields(MessageTurn) if f.init)
# The value of a `camera=` resolver argument, quoted or not (a `${camera:NAME}` included).
_IMAGES_PREFIX = "observation.images."
_CAMERA_ARG_RE = re.compile(r"(\bcamera\s*=\s*['\"]?)([^,)'\"\s]+)")


def build_recipe(
    data: Any,
    *,
    make: Callable[..., R],
    origin: str = "<recipe>",
    camera_map: Mapping[str, str] | None = None,
    lines: Mapping[KeyPath, int] | None = None,
) -> R:
    """Validate `data` into a recipe built by `make` (the `Recipe` class: called with its fields, blend
    components first); `lines` maps key paths to YAML lines for error locations.

    Raises:
        RecipeError: the data is not a valid recipe, or `camera_map` binds one camera twice.
    """
    where = Locator(origin, lines or {})
    if not isinstance(data, Mapping):
        raise where.error((), f"a recipe must be a mapping at the top level (messages: or blend:), "
                              f"got {type(data).__name__}")
    _check_keys(data, TOP_KEYS, (), where)
    cameras = _Cameras(data.get("cameras"), camera_map, where)
    description = data.get("description")
    if description is not None and not isinstance(description, str):
        raise where.error(("description",), "description must be text")
    blend = None
    if "blend" in data:
        raw_blend = data["blend"]
        if not isinstance(raw_blend, Mapping):
            raise where.error(("blend",), "blend must map component names to message recipes")
        blend = {
            str(name): _build_component(comp, ("blend", str(name)), where, cameras, make)
            for name, comp in raw_blend.items()
        }
    route = data.get("route")
    if route is not None and route not in ROUTES:
        raise where.error(("route",), f"unsupported route {route!r}; the only route is 'vqa'")
    try:
        # A top-level `weight` (and `route` on a message recipe) means nothing outside a blend; the
        # reference accepts and ignores them, so recipes written for it load here too. A blend with
        # a route is still refused (by Recipe), as in the reference.
        recipe = _make(make, data, (), where, cameras, blend=blend, description=description, cameras=cameras.keys,
                       route=route if blend is not None else None)
    except RecipeFieldError as exc:
        raise where.relocate((), exc) from None
    cameras.check_all_used()
    return recipe


def _build_component(raw: Any, path: KeyPath, where: Locator, cameras: _Cameras, make: Callable[..., R]) -> R:
    if not isinstance(raw, Mapping):
        raise where.error(path, "a blend component must be a mapping with messages and weight")
    _check_keys(raw, COMPONENT_KEYS, path, where)
    if "blend" in raw:
        raise where.error(path + ("blend",), "a blend component cannot itself define a blend (no nesting)")
    if "messages" not in raw:
        raise where.error(path, "a blend component must define messages")
    try:
        return _make(make, raw, path, where, cameras, weight=raw.get("weight"), route=raw.get("route"))
    except RecipeFieldError as exc:
        raise where.relocate(path, exc) from None


def _make(
    make: Callable[..., R], raw: Mapping[str, Any], path: KeyPath, where: Locator, cams: _Cameras, **extra: Any
) -> R:
    """Build one recipe level: its turns and bindings, then the recipe (whose checks raise unlocated)."""
    messages = None
    if "messages" in raw:
        raw_messages = raw["messages"]
        if not isinstance(raw_messages, list):
            raise where.error(path + ("messages",), "messages must be a list of turns")
        messages = tuple(_build_turn(t, path + ("messages", i), where, cams) for i, t in enumerate(raw_messages))
    raw_bindings = raw.get("bindings") or {}
    if not isinstance(raw_bindings, Mapping):
        raise where.error(path + ("bindings",), "bindings must map names to resolver expressions")
    bindings: dict[str, Any] = {}
    for name, expr in raw_bindings.items():
        key_path = path + ("bindings", name)
        if not isinstance(expr, str):
            raise where.error(key_path, f"a binding must be a resolver expression string, got {expr!r}")
        bindings[name] = cams.substitute(expr, key_path, camera_arg=True)
    sites = _binding_sites(messages or (), bindings, path, where)
    return make(messages=messages, bindings=bindings, origin=where.origin, binding_sites=sites, **extra)


def _build_turn(raw: Any, path: KeyPath, where: Locator, cameras: _Cameras) -> MessageTurn:
    if not isinstance(raw, Mapping):
        raise where.error(path, "a turn must be a mapping with role, content and stream")
    _check_keys(raw, TURN_KEYS, path, where)
    kwargs = dict(raw)
    content = kwargs.get("content")
    if isinstance(content, str):
        kwargs["content"] = cameras.substitute(content, path + ("content",))
    elif isinstance(content, list):
        kwargs["content"] = [_camera_block(b, path + ("content", i), cameras) for i, b in enumerate(content)]
    if "role" not in kwargs:
        raise where.error(path, "turn is missing `role` (user, assistant, system or tool)")
    try:
        return MessageTurn(**kwargs)
    except RecipeFieldError as exc:
        raise where.relocate(path, exc) from None


def _camera_block(block: Any, path: KeyPath, cameras: _Cameras) -> Any:
    if not isinstance(block, Mapping):
        return block  # MessageTurn reports it with its path
    return {
        key: (cameras.camera_key(value, path + (key,)) if key == "feature" else cameras.substitute(value, path))
        if isinstance(value, str) else value
        for key, value in block.items()
    }


def _binding_sites(
    messages: tuple[MessageTurn, ...], bindings: Mapping[str, str], path: KeyPath, where: Locator
) -> dict[str, str]:
    """Where each binding comes from, for render-time errors (ambiguous rows on a frame)."""
    sites = {name: f"{where.where(path + ('bindings', name))}: {format_path(path + ('bindings', name))}"
             for name in bindings}
    for i, turn in enumerate(messages):
        for name in sorted(turn.referenced_bindings - set(sites)):
            turn_path = path + ("messages", i)
            sites[name] = f"{where.where(turn_path)}: {format_path(turn_path)} (default binding {name!r})"
    return sites


def _check_keys(raw: Mapping[Any, Any], allowed: tuple[str, ...], path: KeyPath, where: Locator) -> None:
    for key in raw:
        if key not in allowed:
            raise where.error(
                path + (str(key),),
                f"unknown key {key!r}{did_you_mean(str(key), allowed)}; allowed keys: {', '.join(allowed)}",
                shown=path,
            )


class _Cameras:
    """Binds recipe camera names (`cameras:` + `${camera:NAME}`) and literal keys to dataset keys."""

    def __init__(self, declared: Any, camera_map: Mapping[str, str] | None, where: Locator) -> None:
        self.where = where
        declared = {} if declared is None else declared
        if not isinstance(declared, Mapping):
            raise where.error(("cameras",), "cameras must map names to dataset camera keys")
        for name, key in declared.items():
            if not isinstance(name, str) or not PLACEHOLDER_RE.fullmatch(f"${{{name}}}"):
                raise where.error(("cameras", str(name)), "a camera name must be an identifier")
            if not isinstance(key, str) or not key:
                raise where.error(("cameras", name), "a camera must map to a dataset camera key, e.g. "
                                                      "observation.images.top")
        self.camera_map = self._by_name(dict(camera_map or {}), declared)
        for src, dst in self.camera_map.items():
            if not isinstance(dst, str) or not dst:
                raise RecipeError(f"{where.origin}: camera_map {src!r} must map to a dataset camera key")
        self.keys = {str(name): str(self.camera_map.get(name) or key) for name, key in declared.items()}
        self.used = {name for name in self.camera_map if name in self.keys}

    @staticmethod
    def _by_name(camera_map: dict[str, str], declared: Mapping[str, str]) -> dict[str, str]:
        """camera_map keyed by recipe camera name, a declared camera's default key counting as its name.

        So `observation.images.top=...` and `top=...` rebind the same camera when the recipe declares
        `top: observation.images.top`; any other key stays as given (a literal key the recipe uses).
        """
        by_key = {str(key): str(name) for name, key in declared.items()}
        out: dict[str, str] = {}
        for src, dst in camera_map.items():
            name = src if src in declared else by_key.get(src, src)
            if name in out and out[name] != dst:
                raise RecipeError(f"camera_map binds camera {name!r} twice ({out[name]!r} and {dst!r})")
            out[name] = dst
        return out

    def substitute(self, text: str, path: KeyPath, *, camera_arg: bool = False) -> str:
        """Replace `${camera:NAME}`; with `camera_arg`, also remap a literal `camera=KEY` via camera_map."""
        if camera_arg:
            text = _CAMERA_ARG_RE.sub(lambda m: m.group(1) + self.camera_key(m.group(2), path), text)
        return CAMERA_RE.sub(lambda m: self._lookup(m.group(1), path), text)

    def camera_key(self, value: str, path: KeyPath) -> str:
        """A camera-valued field: placeholders are bound, a literal key listed in camera_map is remapped."""
        if CAMERA_RE.search(value):
            return self.substitute(value, path)
        for src in (value, value.removeprefix(_IMAGES_PREFIX)):
            if src in self.camera_map and src not in self.keys:
                self.used.add(src)
                return self.camera_map[src]
        return value

    def _lookup(self, name: str, path: KeyPath) -> str:
        if name not in self.keys:
            known = ", ".join(sorted(self.keys)) or "none declared"
            raise self.where.error(
                path, f"unknown camera {name!r}{did_you_mean(name, self.keys)}; declare it under "
                      f"`cameras:` (declared: {known})"
            )
        return self.keys[name]

    def check_all_used(self) -> None:
        """Warn (not fail) about camera_map keys the recipe never reads: one command line serves many recipes."""
        unused = sorted(set(self.camera_map) - self.used)
        if unused:
            names = ", ".join(f"{n} ({k})" for n, k in sorted(self.keys.items())) or "none"
            log.warning(
                "%s: camera_map names %s, which this recipe does not use (its cameras: %s); ignored",
                self.where.origin, ", ".join(repr(u) for u in unused), names,
            )
