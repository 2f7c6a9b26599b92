"""Deterministic choices keyed by the sample index: blend component, VQA camera, task rephrasing.

Each choice hashes a string with 8-byte blake2b, exactly as the reference does, so the same
dataset index picks the same component in steerable and in LeRobot.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from hashlib import blake2b

from steerable.recipes.model import Recipe

__all__ = ["WeightedChoice", "choose_component", "hash64", "rephrasing_index"]

_TWO_64 = 2**64


def hash64(key: str) -> int:
    """The 8-byte blake2b digest of `key` as a big-endian integer."""
    return int.from_bytes(blake2b(key.encode(), digest_size=8).digest(), "big")


def rephrasing_index(sample_idx: int, count: int) -> int:
    """Which of `count` task_aug rephrasings `${task}` reads for this sample."""
    return hash64(f"task_aug:{sample_idx}") % count


class WeightedChoice:
    """Picks an index with probability proportional to its weight, deterministically per sample.

    The draw is `hash64(salt + str(sample_idx)) / 2**64 * total`; the pick is the first index whose
    running weight sum exceeds the draw (the last one if rounding leaves none).
    """

    __slots__ = ("_cumulative", "_last", "salt", "total")

    def __init__(self, weights: Sequence[float], *, salt: str = "") -> None:
        if not weights:
            raise ValueError("WeightedChoice needs at least one weight")
        self._cumulative: list[float] = []
        running = 0.0
        for weight in weights:
            running += weight
            self._cumulative.append(running)
        self.total = sum(weights)
        self._last = len(weights) - 1
        self.salt = salt

    def pick(self, sample_idx: int) -> int:
        digest = blake2b(f"{self.salt}{sample_idx}".encode(), digest_size=8).digest()  # hash64, inlined
        draw = int.from_bytes(digest, "big") / _TWO_64 * self.total
        return min(bisect_right(self._cumulative, draw), self._last)


def choose_component(recipe: Recipe, sample_idx: int, *, exclude_routed: bool = False) -> tuple[str, Recipe] | None:
    """The blend component drawn for `sample_idx` (a message recipe is its own only component).

    With `exclude_routed`, `route: vqa` components leave the draw and the rest are renormalised;
    None when nothing is left.
    """
    pool = [(n, c) for n, c in recipe.components() if not (exclude_routed and c.route == "vqa")]
    if not recipe.is_blend:
        return pool[0]
    if not pool:
        return None
    return pool[WeightedChoice([c.weight or 0.0 for _, c in pool]).pick(int(sample_idx))]
