"""An independent, deliberately naive model of the reference renderer (LeRobot's `render_sample`).

Written from the rules in shared/reference/upstream-language-and-recipes.md (sections 2-4), with no
code shared with `steerable.recipes`: plain dict recipes, linear scans, eager copies. Tests use it
as the oracle that `--compat lerobot` must equal frame for frame; the LeRobot training step's task
fallback is modelled by `training_step`.
"""

from __future__ import annotations

import copy
import re
from hashlib import blake2b
from typing import Any

__all__ = ["lerobot_recipe", "render_sample", "training_step"]

_PLACEHOLDER = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_CALL = re.compile(r"^(?P<name>[A-Za-z_][A-Za-z0-9_]*)\((?P<args>.*)\)$")
_PERSISTENT = {"subtask", "plan", "memory", "motion", "task_aug"}
_EVENT = {"interjection", "vqa", "trace"}
_TOLERANCE = 0.1
_DEFAULTS = {
    "subtask": "active_at(t, style=subtask)",
    "memory": "active_at(t, style=memory)",
    "plan": "active_at(t, style=plan)",
    "speech": "emitted_at(t, role=assistant, tool_name=say)",
    "interjection": "emitted_at(t, style=interjection)",
    "vqa": "emitted_at(t, style=vqa, role=assistant)",
    "vqa_query": "emitted_at(t, style=vqa, role=user)",
}


class Ambiguous(ValueError):
    pass


def lerobot_recipe(data: dict[str, Any], cameras: dict[str, str]) -> dict[str, Any]:
    """A steerable YAML recipe as the reference sees it: camera variables bound, our extra keys dropped."""

    def bind(value: Any) -> Any:
        if isinstance(value, str):
            for name, key in cameras.items():
                value = value.replace("${camera:" + name + "}", key)
            return value
        if isinstance(value, dict):
            return {k: bind(v) for k, v in value.items()}
        if isinstance(value, list):
            return [bind(v) for v in value]
        return value

    out = {k: bind(v) for k, v in data.items() if k not in ("description", "cameras")}
    return out


def _persistent_style(style: str | None) -> bool:
    if style is None or style in _EVENT:
        return False
    if style in _PERSISTENT:
        return True
    raise ValueError(f"Unknown language style: {style!r}")


def _matches(row: dict[str, Any], sel: dict[str, Any]) -> bool:
    for key in ("style", "role", "camera"):
        if sel.get(key) is not None and row.get(key) != sel[key]:
            return False
    name = sel.get("tool_name")
    if name is None:
        return True
    for call in row.get("tool_calls") or []:
        if isinstance(call, dict) and isinstance(call.get("function"), dict) and call["function"].get("name") == name:
            return True
    return False


def _one(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    if len(rows) > 1:
        raise Ambiguous(f"{len(rows)} matching rows")
    return rows[0] if rows else None


def _ts(row: dict[str, Any]) -> float:
    return float(row["timestamp"])


def _resolve(spec: str, persistent: list[dict[str, Any]], events: list[dict[str, Any]], t: float) -> Any:
    m = _CALL.match(spec.strip())
    assert m, spec
    sel: dict[str, Any] = {}
    for piece in [p.strip() for p in m["args"].split(",") if p.strip()]:
        if piece == "t":
            continue
        key, value = (x.strip() for x in piece.split("=", 1))
        sel[key] = int(value) if key == "offset" else value.strip("\"'")
    name, style = m["name"], sel.get("style")
    offset = sel.pop("offset", 1)
    if name == "emitted_at":
        if _persistent_style(style):
            return _one([r for r in persistent if _matches(r, sel) and abs(_ts(r) - t) <= _TOLERANCE])
        return _one([r for r in events if _matches(r, sel)])
    assert _persistent_style(style), spec
    rows = [r for r in persistent if _matches(r, sel)]
    if name == "active_at":
        past = [r for r in rows if _ts(r) <= t]
        if not past:
            return None
        latest = max(_ts(r) for r in past)
        return _one([r for r in past if _ts(r) == latest])
    ordered = sorted(rows, key=lambda r: (_ts(r), r.get("style") or "", r.get("role") or ""))
    signed = offset if name == "nth_next" else -offset
    anchor = None
    for i, r in enumerate(ordered):
        if _ts(r) <= t:
            anchor = i
    # Before the first row, the first row is "next 1" and nothing is previous.
    target = (signed - 1 if signed > 0 else None) if anchor is None else anchor + signed
    return ordered[target] if target is not None and 0 <= target < len(ordered) else None


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, dict):
        return "" if value.get("content") is None else str(value["content"])
    return str(value)


def _referenced(recipe: dict[str, Any]) -> set[str]:
    names: set[str] = set()
    for turn in recipe["messages"]:
        names |= {turn[k] for k in ("if_present", "tool_calls_from") if turn.get(k)}
        content = turn.get("content")
        strings = [content] if isinstance(content, str) else [
            v for block in content or [] for v in block.values() if isinstance(v, str)
        ]
        for s in strings:
            names |= set(_PLACEHOLDER.findall(s))
    return names


def _task(task: str | None, persistent: list[dict[str, Any]], sample_idx: int) -> str | None:
    if task is not None:
        return task
    aug = [r for r in persistent if r.get("style") == "task_aug" and r.get("role") == "user"]
    if aug:
        pick = int.from_bytes(blake2b(f"task_aug:{sample_idx}".encode(), digest_size=8).digest(), "big") % len(aug)
        if aug[pick].get("content"):
            return str(aug[pick]["content"])
    return None


def _render_messages(recipe: dict[str, Any], persistent: list[dict[str, Any]], events: list[dict[str, Any]],
                     t: float, sample_idx: int, task: str | None) -> dict[str, Any] | None:
    specs = {**_DEFAULTS, **(recipe.get("bindings") or {})}
    values: dict[str, Any] = {"task": _task(task, persistent, sample_idx)}
    for name in (_referenced(recipe) | set(recipe.get("bindings") or {})) - {"task"}:
        values[name] = _resolve(specs[name], persistent, events, t)
    messages: list[dict[str, Any]] = []
    streams: list[str] = []
    targets: list[int] = []
    for turn in recipe["messages"]:
        if turn.get("if_present") and values.get(turn["if_present"]) is None:
            continue
        message: dict[str, Any] = {"role": turn["role"]}
        content = turn.get("content")
        if isinstance(content, str):
            message["content"] = _PLACEHOLDER.sub(lambda m: _text(values[m[1]]), content)
        elif content is not None:
            message["content"] = [
                {k: _PLACEHOLDER.sub(lambda m: _text(values[m[1]]), v) if isinstance(v, str) else copy.deepcopy(v)
                 for k, v in block.items()}
                for block in content
            ]
        source = values.get(turn["tool_calls_from"]) if turn.get("tool_calls_from") else None
        if isinstance(source, dict) and source.get("tool_calls"):
            message["tool_calls"] = copy.deepcopy(source["tool_calls"])
        if turn.get("target"):
            targets.append(len(messages))
        messages.append(message)
        streams.append(turn["stream"])
    if not targets and "low_level" not in streams:
        return None
    return {"messages": messages, "message_streams": streams, "target_message_indices": targets}


def _walk(weights: list[float], key: str) -> int:
    draw = int.from_bytes(blake2b(key.encode(), digest_size=8).digest(), "big") / 2**64 * sum(weights)
    running = 0.0
    for i, w in enumerate(weights):
        running += w
        if draw < running:
            return i
    return len(weights) - 1


def render_sample(recipe: dict[str, Any], persistent: list[Any] | None, events: list[Any] | None, t: float,
                  sample_idx: int, task: str | None = None) -> dict[str, Any] | None:
    """The reference `render_sample` (HEAD): VQA routing, weighted draw, bindings, messages."""
    rows = []
    for source in (persistent or [], events or []):
        checked = []
        for r in source:
            if r is None:
                continue
            if not isinstance(r, dict):
                raise TypeError(f"Language rows must be dictionaries, got {type(r).__name__}.")
            checked.append(dict(r))
        rows.append(checked)
    p, e = rows
    blend = recipe.get("blend")
    if not blend:
        return _render_messages(recipe, p, e, t, sample_idx, task)
    routed = []
    for component in blend.values():
        if component.get("route") == "vqa":
            out = _render_messages(component, p, e, t, sample_idx, task)
            if out is not None:
                routed.append((component["weight"], out))
    if len(routed) == 1:
        return routed[0][1]
    if routed:
        return routed[_walk([w for w, _ in routed], f"vqa:{sample_idx}")][1]
    components = list(blend.values())
    chosen = components[_walk([c.get("weight") or 0.0 for c in components], str(sample_idx))]
    return _render_messages(chosen, p, e, t, sample_idx, task)


def training_step(recipe: dict[str, Any], persistent: list[Any] | None, events: list[Any] | None, t: float,
                  sample_idx: int, task: str | None) -> dict[str, Any] | None:
    """The reference training step for one sample: no language or nothing rendered -> the task sample."""
    fallback = None
    if isinstance(task, str) and task:
        fallback = {"messages": [{"role": "user", "content": task}], "message_streams": ["low_level"],
                    "target_message_indices": []}
    if not persistent and not events:
        return fallback
    return render_sample(recipe, persistent, events, t, sample_idx, task) or fallback
