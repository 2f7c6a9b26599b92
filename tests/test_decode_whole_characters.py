"""Generated text holds whole characters only (#34, item 18): a weak policy's byte-level tokens can stop
inside a multi-byte UTF-8 character or emit a stray byte, which the tokenizer shows as U+FFFD ("�");
the subtask LeRobot's scripts log (`lerobot-rollout`) and every other generated text leave it out."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from steerable.policy.processor import Processor
from steerable.policy.tokenizer import build_tiny_tokenizer


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    return build_tiny_tokenizer(["pick up the red cube", "put it in the left bin"])


def _decode(tokenizer: Any, ids: list[int]) -> str:
    return Processor.decode(SimpleNamespace(tokenizer=tokenizer), ids)  # type: ignore[arg-type]


def _byte(tokenizer: Any, value: int) -> int:
    """The id of the byte-level token of one raw byte (GPT-2's byte-to-character table)."""
    printable = [*range(33, 127), *range(161, 173), *range(174, 256)]
    extra = [b for b in range(256) if b not in printable]
    table = {b: chr(b) for b in printable} | {b: chr(256 + i) for i, b in enumerate(extra)}
    return int(tokenizer.convert_tokens_to_ids(table[value]))


def test_a_character_cut_short_or_a_stray_byte_is_left_out(tokenizer: Any) -> None:
    pick = tokenizer("pick up", add_special_tokens=False)["input_ids"]
    assert tokenizer.decode([*pick, _byte(tokenizer, 0xC3)]).endswith("\ufffd")  # what the tokenizer gives
    assert _decode(tokenizer, [*pick, _byte(tokenizer, 0xC3)]) == "pick up"  # the first byte of "é" only
    assert _decode(tokenizer, [_byte(tokenizer, 0xA9), *pick]) == "pick up"  # a continuation byte alone


def test_a_character_split_over_tokens_stays_whole(tokenizer: Any) -> None:
    pick = tokenizer("pick", add_special_tokens=False)["input_ids"]
    e_acute = [_byte(tokenizer, 0xC3), _byte(tokenizer, 0xA9)]
    assert _decode(tokenizer, [*pick, *e_acute]) == "pické"
