"""Name swapping: a training augmentation that makes a small model copy names instead of recalling them.

A plan, a memory or a revised plan repeats the names its prompt gives ("put the red cube in the
blue bin" -> "1. pick up the red cube ..."). A few hundred episodes hold a few hundred such tasks,
and a tiny model learns them by heart: on a new task it writes the plan of a similar training task
with one name swapped. Swapping the names of a sample consistently (every "red cube" of its prompt
and its answer becomes "pink cube", and so on) turns each training task into many, so the only
way to fit them is to copy the name from the prompt.

The names come in groups of interchangeable ones (cubes with cubes, bins with bins): a name only
ever becomes another of its group. Only the components whose answer follows from the text of the
prompt alone may be swapped: the observation still shows the scene as recorded, so a component that
reads the scene (which step is active, the actions) would learn a wrong binding.

This module is torch-free: strings and a numpy generator.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from steerable.errors import ConfigError

__all__ = ["TEXT_ONLY_COMPONENTS", "NameSwap"]

# The `hierarchical` recipe's components whose answer the prompt's text decides (task, plan, memory,
# interjection): the default set a swap applies to.
TEXT_ONLY_COMPONENTS = ("plan", "plan_update", "memory_update", "interjection_response", "high_level_subtask")


@dataclass(frozen=True)
class NameSwap:
    """Swap the names of `groups` in a sample's text with probability `rate`, for `components`."""

    groups: tuple[tuple[str, ...], ...]
    rate: float = 0.5
    components: frozenset[str] = frozenset(TEXT_ONLY_COMPONENTS)
    _pattern: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not 0 <= self.rate <= 1:
            raise ConfigError(f"--swap_rate must be in [0, 1], got {self.rate}")
        seen: dict[str, int] = {}
        for k, group in enumerate(self.groups):
            if len(set(group)) < 2:
                raise ConfigError(f"--swap_names: group {list(group)} needs at least two different names")
            for name in group:
                if not name.strip():
                    raise ConfigError("--swap_names: a name is empty")
                if seen.get(name, k) != k:
                    raise ConfigError(f"--swap_names: {name!r} is in two groups")
                seen[name] = k
        # Longest first, so "red cube" wins over a shorter name it contains.
        names = sorted(seen, key=len, reverse=True)
        object.__setattr__(self, "_pattern", re.compile(r"\b(" + "|".join(map(re.escape, names)) + r")\b"))

    @classmethod
    def from_settings(
        cls,
        groups: Sequence[Sequence[str]],
        rate: float,
        components: Sequence[str] | None,
        recipe_components: Sequence[str],
    ) -> NameSwap | None:
        """The swap `steerable train` asked for (None when it names no groups). Explicit `components`
        must be in the recipe; the default set is cut to the recipe's components."""
        if not groups:
            return None
        if components is None:
            chosen = [c for c in TEXT_ONLY_COMPONENTS if c in recipe_components]
        else:
            unknown = sorted(set(components) - set(recipe_components))
            if unknown:
                raise ConfigError(
                    f"--swap_components: the recipe has no component {', '.join(unknown)} "
                    f"(components: {', '.join(sorted(recipe_components))})"
                )
            chosen = list(components)
        return cls(tuple(tuple(g) for g in groups), rate, frozenset(chosen))

    def mapping(self, rng: np.random.Generator) -> dict[str, str]:
        """A random permutation within each group (identity for some names, as a permutation may be)."""
        out: dict[str, str] = {}
        for group in self.groups:
            names = list(dict.fromkeys(group))
            for name, k in zip(names, rng.permutation(len(names)), strict=True):
                out[name] = names[int(k)]
        return out

    def draw(self, component: str | None, rng: np.random.Generator) -> dict[str, str] | None:
        """The mapping to apply to a sample of `component`, or None (not swapped this time)."""
        if component not in self.components or rng.random() >= self.rate:
            return None
        return self.mapping(rng)

    def text(self, value: str, mapping: Mapping[str, str]) -> str:
        return self._pattern.sub(lambda m: mapping.get(m.group(1), m.group(1)), value)

    def messages(
        self, messages: Sequence[Mapping[str, Any]], mapping: Mapping[str, str]
    ) -> list[dict[str, Any]]:
        """`messages` with every string of their contents and tool-call arguments swapped."""
        return [
            {k: (v if k in ("role", "stream") else self._walk(v, mapping)) for k, v in m.items()}
            for m in messages
        ]

    def _walk(self, value: Any, mapping: Mapping[str, str]) -> Any:
        if isinstance(value, str):
            return self.text(value, mapping)
        if isinstance(value, Mapping):
            return {k: (v if k in ("type", "name") else self._walk(v, mapping)) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self._walk(v, mapping) for v in value]
        return value
