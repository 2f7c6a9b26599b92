"""Schema-driven replies for the test server: a minimal valid instance, a violating one, and the
schema a prompt-only client embedded in its prompt."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["minimal_instance", "schema_in_prompt", "violating_instance"]


def _resolve(schema: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    """Follow local `$ref`s (`#/$defs/X`, as pydantic writes them)."""
    seen = 0
    while "$ref" in schema and seen < 32:
        ref = schema["$ref"]
        if not isinstance(ref, str) or not ref.startswith("#/"):
            raise ValueError(f"only local $ref is supported, got {ref!r}")
        node: Any = root
        for part in ref[2:].split("/"):
            node = node[part.replace("~1", "/").replace("~0", "~")]
        schema = {**node, **{k: v for k, v in schema.items() if k != "$ref"}}
        seen += 1
    return schema


def _type(schema: dict[str, Any]) -> str | None:
    kind = schema.get("type")
    if isinstance(kind, list):
        non_null = [k for k in kind if k != "null"]
        return non_null[0] if non_null else "null"
    if kind is None and "properties" in schema:
        return "object"
    if kind is None and "items" in schema:
        return "array"
    return kind if isinstance(kind, str) else None


def minimal_instance(schema: dict[str, Any], root: dict[str, Any] | None = None) -> Any:
    """The smallest value valid against `schema` (required keys only, minItems items, bounded numbers)."""
    root = schema if root is None else root
    schema = _resolve(schema, root)
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    for key in ("anyOf", "oneOf"):
        if schema.get(key):
            return minimal_instance(schema[key][0], root)
    if schema.get("allOf"):
        merged: dict[str, Any] = {"properties": {}, "required": []}
        for part in schema["allOf"]:
            part = _resolve(part, root)
            merged["properties"].update(part.get("properties", {}))
            merged["required"] += part.get("required", [])
        return minimal_instance(merged, root)
    kind = _type(schema)
    if kind == "object":
        props = schema.get("properties", {})
        return {name: minimal_instance(props.get(name, {}), root) for name in schema.get("required", [])}
    if kind == "array":
        prefix = schema.get("prefixItems", [])
        count = max(schema.get("minItems", 0), len(prefix) if schema.get("minItems") else 0)
        items = schema.get("items", {})
        items = items if isinstance(items, dict) else {}
        return [minimal_instance(prefix[i] if i < len(prefix) else items, root) for i in range(count)]
    if kind == "string":
        return "x" * schema.get("minLength", 0)
    if kind in ("integer", "number"):
        return _number(schema, integer=kind == "integer")
    if kind == "boolean":
        return False
    if kind == "null":
        return None
    return {}


def _number(schema: dict[str, Any], *, integer: bool) -> float | int:
    low = schema.get("minimum", schema.get("exclusiveMinimum"))
    high = schema.get("maximum", schema.get("exclusiveMaximum"))
    value: float = 0
    if low is not None and value <= low:
        value = low + (1 if "exclusiveMinimum" in schema and "minimum" not in schema else 0)
    if high is not None and value >= high:
        value = high - (1 if "exclusiveMaximum" in schema and "maximum" not in schema else 0)
    return int(value) if integer else float(value)


def violating_instance(schema: dict[str, Any]) -> Any:
    """A JSON value of the wrong type for `schema`, or None when the schema accepts any type."""
    resolved = _resolve(schema, schema)
    wrong_for = {
        "object": [],
        "array": {},
        "string": 0,
        "integer": "0",
        "number": "0",
        "boolean": "no",
        "null": 1,
    }
    kind = _type(resolved)
    if kind in wrong_for:
        return wrong_for[kind]
    if resolved.get("enum"):
        return {"not": "in the enum"}
    return None


def schema_in_prompt(messages: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The last JSON schema written in the messages' text (how prompt-only clients ask for a shape)."""
    decoder = json.JSONDecoder()
    for message in reversed(messages):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        texts = (
            [content]
            if isinstance(content, str)
            else [b.get("text", "") for b in content or [] if isinstance(b, dict) and b.get("type") == "text"]
        )
        for text in reversed(texts):
            found: dict[str, Any] | None = None
            start = text.find("{")
            while start >= 0:
                try:
                    value, end = decoder.raw_decode(text, start)
                except json.JSONDecodeError:
                    start = text.find("{", start + 1)
                    continue
                if isinstance(value, dict) and ({"type", "properties", "$defs", "anyOf"} & value.keys()):
                    found = value
                start = text.find("{", end)
            if found is not None:
                return found
    return None
