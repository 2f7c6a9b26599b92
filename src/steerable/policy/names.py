"""Name slots: the names of a text-decided prompt replaced by canonical ones, so a small model plans
over the shape of a task and never has to copy a name.

A plan, a memory or a revised plan repeats the names its prompt gives ("put the pink cube in the
grey bin" -> "1. pick up the pink cube ..."). A few hundred episodes hold a few hundred such tasks,
and a tiny model learns them by heart: on a new task it writes the plan of a similar training task
with one name swapped. It does not learn to copy: swapping the names of its training samples at
random (each task seen under many names) left it worse, not better (docs/policy.md).

With `PolicyConfig.name_slots` (groups of interchangeable names: by default the kinds of objects the
dataset's object description declares, `objects.ObjectLayout.name_groups`), every
name of such a prompt is replaced by its group's canonical name for its order of first appearance:
the first cube the prompt mentions is always the group's first name, the second cube the second,
and so on. "put the pink cube in the grey bin, then the red cube in the left zone" becomes "put the
red cube in the blue bin, then the green cube in the yellow bin" (with the groups' first names), and
its plan becomes one fixed function of the task's shape, which a tiny model does learn. Training
renames prompt and answer with one mapping; the runtime renames the prompt, and maps the reply back
with the inverse mapping before anything reads it.

The mapping is a permutation within each group (names the prompt does not mention take the slots
left over, in the group's order), so any name the model writes maps back to a real one. Only the
components whose answer the prompt's text decides are renamed: the cameras and the state still show
the scene as it is, so a prompt that reads the scene (which step is active, a question about the
image, the actions) keeps its names.

This module is torch-free: strings only.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from steerable.errors import ConfigError

__all__ = ["SLOT_COMPONENTS", "NameSlots"]

# The `hierarchical` recipe's components whose answer the prompt's text decides (task, plan, memory,
# interjection): the ones whose samples are renamed. The runtime asks them as plan, memory,
# interjection and subtask (a subtask from task + plan + memory).
SLOT_COMPONENTS = frozenset({"plan", "plan_update", "memory_update", "interjection_response", "high_level_subtask"})
_KEEP = frozenset({"role", "stream", "type", "name"})


class NameSlots:
    """Canonical renaming over `groups` of interchangeable names (`PolicyConfig.name_slots`)."""

    def __init__(self, groups: Sequence[Sequence[str]]) -> None:
        self.groups = tuple(tuple(g) for g in groups)
        seen: dict[str, int] = {}
        for k, group in enumerate(self.groups):
            if len(set(group)) != len(group) or len(group) < 2:
                raise ConfigError(f"policy.name_slots: group {list(group)} needs two or more different names")
            for name in group:
                if not name.strip():
                    raise ConfigError("policy.name_slots: a name is empty")
                if name in seen:
                    raise ConfigError(f"policy.name_slots: {name!r} is in two groups")
                seen[name] = k
        self._group_of = seen
        # Longest first, so "left zone" is read as a place, never as the direction "left".
        names = sorted(seen, key=len, reverse=True)
        self._pattern = re.compile(r"\b(" + "|".join(map(re.escape, names)) + r")\b") if names else None

    def __bool__(self) -> bool:
        return bool(self.groups)

    def names_in(self, texts: Iterable[str]) -> list[str]:
        """Every name of `texts`, in order (repeats included)."""
        if self._pattern is None:
            return []
        return [m.group(1) for text in texts for m in self._pattern.finditer(text)]

    def mapping(self, texts: Iterable[str]) -> dict[str, str]:
        """Real name -> canonical name: in each group, the names in order of first appearance in
        `texts` take the group's names in order; the others take the slots left over, in order."""
        order: list[list[str]] = [[] for _ in self.groups]
        for name in self.names_in(texts):
            seen = order[self._group_of[name]]
            if name not in seen:
                seen.append(name)
        out: dict[str, str] = {}
        for group, mentioned in zip(self.groups, order, strict=True):
            real = mentioned + [n for n in group if n not in mentioned]
            out.update(zip(real, group, strict=True))
        return out

    def text(self, value: str, mapping: Mapping[str, str]) -> str:
        if self._pattern is None:
            return value
        return self._pattern.sub(lambda m: mapping.get(m.group(1), m.group(1)), value)

    def messages(self, messages: Sequence[Mapping[str, Any]], mapping: Mapping[str, str]) -> list[dict[str, Any]]:
        """`messages` with every string of their contents and tool-call arguments renamed."""
        return [{k: (v if k in _KEEP else self._walk(v, mapping)) for k, v in m.items()} for m in messages]

    def canonical(self, messages: Sequence[Mapping[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, str]]:
        """(`messages` renamed, the mapping used): the mapping follows the order of the prompt's names,
        the messages before the first assistant turn (what the runtime has when it asks)."""
        prompt: list[str] = []
        for m in messages:
            if m.get("role") == "assistant":
                break
            prompt += _strings(m.get("content"))
        mapping = self.mapping(prompt)
        return self.messages(messages, mapping), mapping

    def restore(self, reply: Any, mapping: Mapping[str, str]) -> Any:
        """A generated reply (text and tool calls) mapped back to the real names."""
        back = {v: k for k, v in mapping.items()}
        return dataclasses.replace(reply, text=self.text(reply.text or "", back),
                                   tool_calls=[self._walk(c, back) for c in reply.tool_calls])

    def _walk(self, value: Any, mapping: Mapping[str, str]) -> Any:
        if isinstance(value, str):
            return self.text(value, mapping)
        if isinstance(value, Mapping):
            return {k: (v if k in _KEEP else self._walk(v, mapping)) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self._walk(v, mapping) for v in value]
        return value


def _strings(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    if isinstance(content, list):
        return [b.get("text", "") for b in content if isinstance(b, Mapping) and isinstance(b.get("text"), str)]
    return []
