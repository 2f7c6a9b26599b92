"""Tokenizers for the policy: a small BPE trained on the dataset's own text, or the backbone's.

The tiny backbone has no pretrained vocabulary, so a byte-level BPE is trained in-process on the
language the policy will read and write (tasks, annotation rows, tool-call replies) and saved
with the checkpoint. Its ChatML-style template renders tool calls as `<tool_call>{json}</tool_call>`
so generated text can be parsed back into calls.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from steerable.errors import ConfigError

__all__ = ["CHAT_TEMPLATE", "EOS", "build_tiny_tokenizer", "corpus_from_dataset", "load_tokenizer"]

BOS, EOS, PAD = "<|im_start|>", "<|im_end|>", "<pad>"

# Text-only ChatML. Image blocks never reach the text: cameras sit in the model's prefix.
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m.role }}{{ '\\n' }}"
    "{% if m.content is string %}{{ m.content }}{% endif %}"
    "{% if m.tool_calls %}{% for c in m.tool_calls %}"
    "<tool_call>{{ {'name': c.function.name, 'arguments': c.function.arguments} | tojson }}</tool_call>"
    "{% endfor %}{% endif %}<|im_end|>{{ '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant{{ '\\n' }}{% endif %}"
)


def build_tiny_tokenizer(corpus: Iterable[str], vocab_size: int = 512) -> Any:
    """A byte-level BPE fitted on `corpus`, with the ChatML template (any byte string stays encodable)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    trainer = trainers.BpeTrainer(vocab_size=max(vocab_size, len(alphabet) + 8), special_tokens=[PAD, BOS, EOS],
                                  initial_alphabet=alphabet, show_progress=False)
    base = ["user", "assistant", "system", "<tool_call>", "</tool_call>", '{"name": "say", "arguments": {"text": "']
    core.train_from_iterator([*base, *corpus], trainer)
    tok = PreTrainedTokenizerFast(tokenizer_object=core, pad_token=PAD, eos_token=EOS, bos_token=BOS)
    tok.chat_template = CHAT_TEMPLATE
    return tok


def load_tokenizer(path: Path) -> Any:
    """A tokenizer saved with `save_pretrained` (a checkpoint's, or a pretrained backbone's folder)."""
    from transformers import AutoTokenizer

    try:
        tok = AutoTokenizer.from_pretrained(str(path))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot load a tokenizer from {path}: {exc}") from None
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    if not getattr(tok, "chat_template", None):
        tok.chat_template = CHAT_TEMPLATE
    return tok


def corpus_from_dataset(dataset: Any) -> list[str]:
    """Every text the policy will see in `dataset`: tasks and the content of every language row."""
    from steerable.language.styles import LANGUAGE_EVENTS, LANGUAGE_PERSISTENT

    texts = list(dataset.tasks.values())
    columns = [c for c in (LANGUAGE_PERSISTENT, LANGUAGE_EVENTS) if c in dataset.features]
    for ep in dataset.episodes:
        if not columns:
            break
        table = dataset.read_episode(ep.episode_index, columns)
        for column in columns:
            for frame_rows in table.column(column).to_pylist():
                for row in frame_rows or ():
                    if row.get("content"):
                        texts.append(str(row["content"]))
                    texts += [c if isinstance(c, str) else json.dumps(c) for c in row.get("tool_calls") or ()]
                if column == LANGUAGE_PERSISTENT:
                    break  # the persistent list repeats on every frame: one frame is enough
    return list(dict.fromkeys(texts))
