"""A responder that gives structurally realistic answers, for end-to-end tests and benchmarks.

Still a test tool, not a model: it never looks at images. Subtask lists are spread evenly over the
time window the prompt asks about; strings are short words instead of empty; arrays get their
minimum length (at least one item); VQA boxes are small and inside a 100 x 100 corner of the frame.
"""

from __future__ import annotations

import re
from typing import Any

from steerable.testing.server.instances import minimal_instance

__all__ = ["plausible_responder"]

_WINDOW = re.compile(r"between t=(?P<a>[0-9.]+)s and t=(?P<b>[0-9.]+)s")
_WORDS = ("pick up block", "place block in bin", "move arm", "open gripper")


def _text(messages: list[dict[str, Any]]) -> str:
    parts: list[str] = []
    for m in messages:
        content = m.get("content")
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            parts += [b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text"]
    return "\n".join(parts)


def _resolve(schema: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/"):
        node: Any = root
        for part in ref[2:].split("/"):
            node = node[part]
        return _resolve(node, root)
    return schema


def _fill(schema: dict[str, Any], root: dict[str, Any], depth: int = 0) -> Any:
    schema = _resolve(schema, root)
    if "const" in schema or schema.get("enum") or depth > 6:
        return minimal_instance(schema, root)
    kind = schema.get("type")
    if kind == "object" or "properties" in schema:
        props = schema.get("properties", {})
        return {name: _fill(props.get(name, {}), root, depth + 1) for name in schema.get("required", props)}
    if kind == "array":
        items = schema.get("items", {}) if isinstance(schema.get("items"), dict) else {}
        count = max(1, int(schema.get("minItems", 1)))
        if "maxItems" in schema:
            count = min(count, int(schema["maxItems"]))
        values = [_fill(items, root, depth + 1) for _ in range(count)]
        if values and all(isinstance(v, int | float) for v in values):
            # Coordinate lists ([x0, y0, x1, y1], [x, y]): increasing pairs give boxes with an area.
            step = [v + 40 * (i // 2) for i, v in enumerate(values)]
            high = _resolve(items, root).get("maximum")
            values = [min(v, high) if high is not None else v for v in step]
        return values
    if kind == "string":
        word = "red block"
        return word if len(word) >= schema.get("minLength", 0) else word * schema["minLength"]
    if kind in ("integer", "number"):
        low = schema.get("minimum", 0)
        high = schema.get("maximum", low + 10)
        value = min(max(low, 10), high)
        return int(value) if kind == "integer" else float(value)
    return minimal_instance(schema, root)


def plausible_responder(messages: list[dict[str, Any]], schema: dict[str, Any] | None) -> Any:
    """A schema-valid, realistic-looking reply; deterministic for the same request."""
    if schema is None:
        return {}
    props = _resolve(schema, schema).get("properties", {})
    window = _WINDOW.search(_text(messages))
    if "subtasks" in props and window:
        a, b = float(window["a"]), float(window["b"])
        count = 2 if b - a >= 4 else 1
        step = (b - a) / count
        return {"subtasks": [{"text": _WORDS[i % len(_WORDS)], "start": round(a + i * step, 3)} for i in range(count)]}
    return _fill(schema, schema)
