"""Word noise on what a person says, in training (`steerable train --text_noise P`).

A high level trained on one dataset's phrasings reads its tasks as memorised strings: "drop the red cube
into the blue bin" is not "put the red cube in the blue bin" to it. This noise teaches it which words
carry the request. In a training sample with a text target, every user message that holds a person's
words (the task, or a user row of the episode: a task rephrasing, an interjection) has each word that
the target does not repeat, with probability P, replaced by a made-up word (2-8 random letters: a word the
model has never read, as a paraphrase's new words are to it), dropped, or preceded by a made-up word (one of
the three, evenly). Words the target repeats (the objects a plan copies) are never touched, so a noisy
prompt still says what its target answers. The noise of an item depends on the item's position alone: the
same run draws the same noise, a resumed one too.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["noisy_messages", "word_key"]

_PARTS = re.compile(r"^(\W*)(.*?)(\W*)$", re.DOTALL)  # punctuation before, the word, punctuation after


def _parts(word: str) -> tuple[str, str, str]:
    """(punctuation before, the word, punctuation after); the pattern matches any text."""
    before, core, after = _PARTS.match(word).groups()  # type: ignore[union-attr]
    return before, core, after


def word_key(word: str) -> str:
    """A word as compared with the target's: lower case, without surrounding punctuation."""
    return _parts(word.lower())[1]


def _made_up(rng: np.random.Generator) -> str:
    return "".join(chr(ord("a") + int(c)) for c in rng.integers(26, size=int(rng.integers(2, 9))))


def _noisy(text: str, keep: set[str], p: float, rng: np.random.Generator) -> str:
    out: list[str] = []
    for word in text.split():
        if word_key(word) in keep or rng.random() >= p:
            out.append(word)
            continue
        kind = int(rng.integers(3))
        if kind == 0:  # replaced, keeping the punctuation around it ("Wait," -> "qzv,")
            before, core, after = _parts(word)
            out.append(f"{before}{_made_up(rng)}{after}" if core else word)
        elif kind == 2:  # preceded by another word
            out += [_made_up(rng), word]
        # kind 1: dropped
    return " ".join(out) if out else text


def noisy_messages(messages: Sequence[Mapping[str, Any]], targets: Iterable[int], said: set[str], p: float,
                   rng: np.random.Generator) -> list[dict[str, Any]]:
    """`messages` with the noise of the module docstring on each user message whose content is in `said`
    (a person's words); unchanged without a text target among `targets`."""
    target_text = " ".join(str(messages[i].get("content") or "") for i in targets)
    if p <= 0 or not target_text:
        return [dict(m) for m in messages]
    keep = {word_key(w) for w in target_text.split()}
    return [{**m, "content": _noisy(m["content"], keep, p, rng)}
            if m.get("role") == "user" and isinstance(m.get("content"), str) and m["content"] in said else dict(m)
            for m in messages]
