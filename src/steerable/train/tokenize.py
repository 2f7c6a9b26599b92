"""Tokenize rendered samples with a Hugging Face chat template; labels cover the target turns only.

A target's span is found by templating prefixes of the chat (as the reference does), in
characters, and mapped to tokens through the tokenizer's offsets, so BPE merges across message
boundaries cannot shift it. Where a template breaks the prefix property (it renders a message
differently when it is last), the target's own text is located in the rendering instead.
Truncation never drops target tokens silently: by default whole context messages go first.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from steerable.errors import ConfigError, MissingExtraError

__all__ = ["IGNORE_INDEX", "ChatTokenizer", "TokenizedSample", "Truncation"]

logger = logging.getLogger(__name__)

IGNORE_INDEX = -100
Truncation = Literal["left_context", "right"]
_PROBE = "steerable template probe"
_SAMPLE_KEYS = ("messages", "message_streams", "target_message_indices")


@dataclass
class TokenizedSample:
    """One sample's token ids and labels (IGNORE_INDEX outside target spans), before padding."""

    input_ids: list[int]
    labels: list[int]
    predict_actions: bool
    truncated_target: bool = False
    dropped_messages: int = 0
    image_keys: list[str] = field(default_factory=list)


@dataclass
class _Encoded:
    ids: list[int]
    labels: list[int]
    spans: list[tuple[int, int]]  # token spans of the located targets, in order
    unlocated: int


class _TemplateFailed(Exception):
    """The chat template raised on a chat (e.g. one it considers malformed)."""


class ChatTokenizer:
    """Turns rendered chat samples into `input_ids`, `attention_mask` and `labels` for a causal LM.

    `tools` (usually `dataset.tools`, the info.json catalog) goes to the chat template. Image blocks
    become `{"type": "image"}` placeholders when the template renders them, and are dropped
    otherwise (text-only templates get string content). `predict_actions` is True when any message
    is on the `low_level` stream. `flatten_say=True` writes `say` tool calls as `<say>text</say>`.
    """

    def __init__(
        self,
        tokenizer: Any,
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        max_length: int = 2048,
        truncation: Truncation = "left_context",
        flatten_say: bool = False,
        chat_template_kwargs: Mapping[str, Any] | None = None,
        return_tensors: Literal["pt"] | None = "pt",
    ) -> None:
        if not getattr(tokenizer, "is_fast", False):
            raise ConfigError("ChatTokenizer needs a fast Hugging Face tokenizer (it maps targets through offsets)")
        if max_length < 1:
            raise ConfigError(f"max_length must be at least 1, got {max_length}")
        if truncation not in ("left_context", "right"):
            raise ConfigError(f"truncation must be 'left_context' or 'right', got {truncation!r}")
        self.tokenizer = tokenizer
        self.tools = [dict(t) for t in tools] if tools else None
        self.max_length = max_length
        self.truncation = truncation
        self.flatten_say = flatten_say
        self.template_kwargs = dict(chat_template_kwargs or {})
        self.return_tensors = return_tensors
        self.blocks, self.images = self._probe()
        self.truncated_targets = 0  # samples whose targets could not fit in max_length
        self.unlocated_targets = 0  # targets whose span the template hid (they get no labels)
        self.dropped_messages = 0  # context messages dropped to fit max_length

    # -- the chat the template sees ---------------------------------------------------------------

    def _probe(self) -> tuple[bool, bool]:
        """(template reads block lists, template renders image blocks), by rendering three probes."""
        plain = self._try_render([{"role": "user", "content": _PROBE}])
        text = [{"type": "text", "text": _PROBE}]
        blocks = self._try_render([{"role": "user", "content": text}])
        image = self._try_render([{"role": "user", "content": [{"type": "image"}, *text]}])
        reads_blocks = blocks is not None and _PROBE in blocks and (plain is None or blocks == plain)
        if plain is None and not reads_blocks:
            raise ConfigError(
                "the tokenizer's chat template cannot render a plain user message; "
                "set tokenizer.chat_template to the model's chat template"
            )
        return reads_blocks, reads_blocks and image is not None and image != blocks

    def chat(self, messages: Sequence[Mapping[str, Any]]) -> tuple[list[dict[str, Any]], list[list[str]]]:
        """The messages as the template gets them, and the camera keys of each one's image placeholders."""
        chat, keys = [], []
        for message in messages:
            blocks, cameras = self._blocks(message)
            calls = [_tool_call(c) for c in message.get("tool_calls") or ()]
            if self.flatten_say:
                blocks += [{"type": "text", "text": f"<say>{c['function']['arguments'].get('text', '')}</say>"}
                           for c in calls if _is_say(c)]
                calls = [c for c in calls if not _is_say(c)]
            out: dict[str, Any] = {"role": message["role"]}
            out["content"] = blocks if self.blocks else "".join(b["text"] for b in blocks if b["type"] == "text")
            if calls:
                out["tool_calls"] = calls
            chat.append(out)
            keys.append(cameras)
        return chat, keys

    def _blocks(self, message: Mapping[str, Any]) -> tuple[list[dict[str, Any]], list[str]]:
        content = message.get("content")
        if content is None:
            return [], []
        if isinstance(content, str):
            return [{"type": "text", "text": content}], []
        blocks, cameras = [], []
        for block in content:
            kind = block.get("type") if isinstance(block, Mapping) else None
            if kind == "text":
                blocks.append({"type": "text", "text": str(block.get("text") or "")})
            elif kind in ("image", "image_url") and self.images:  # image_url: an exported JSONL part
                blocks.append({"type": "image"})
                cameras.append(str(block.get("feature") or (block.get("image_url") or {}).get("url") or ""))
        return blocks, cameras

    def _render(self, chat: Sequence[Mapping[str, Any]], generation_prompt: bool = False) -> str:
        try:
            text = self.tokenizer.apply_chat_template(
                list(chat), tools=self.tools, tokenize=False, add_generation_prompt=generation_prompt,
                **self.template_kwargs,
            )
        except Exception as exc:  # templates raise anything (jinja errors, ValueError, raise_exception)
            raise _TemplateFailed(str(exc)) from exc
        return str(text)

    def _try_render(self, chat: Sequence[Mapping[str, Any]], generation_prompt: bool = False) -> str | None:
        try:
            return self._render(chat, generation_prompt)
        except _TemplateFailed:
            return None

    # -- one sample ----------------------------------------------------------------------------

    def encode(
        self,
        messages: Sequence[Mapping[str, Any]],
        message_streams: Sequence[str],
        target_message_indices: Sequence[int],
    ) -> TokenizedSample:
        """Tokenize one rendered sample, truncated to `max_length` without silently losing targets."""
        chat, keys = self.chat(messages)
        targets = sorted({int(i) for i in target_message_indices})
        protected = set(targets) | {i for i, s in enumerate(message_streams) if s == "low_level"}
        keep = list(range(len(chat)))
        enc = self._encode_or_fail(chat, targets)
        if len(enc.ids) > self.max_length and self.truncation == "left_context":
            for victim in _drop_order(chat, targets, protected):
                trial = [i for i in keep if i != victim]
                try:
                    smaller = self._encode([chat[i] for i in trial], [trial.index(t) for t in targets])
                except _TemplateFailed:
                    continue  # the template refuses the chat without this message: keep it
                keep, enc = trial, smaller
                if len(enc.ids) <= self.max_length:
                    break
        start, truncated = _window(len(enc.ids), self.max_length, enc.spans, self.truncation)
        end = start + self.max_length
        dropped = len(chat) - len(keep)
        self._count(truncated, enc.unlocated, dropped)
        return TokenizedSample(
            enc.ids[start:end], enc.labels[start:end], "low_level" in message_streams, truncated, dropped,
            [k for i in keep for k in keys[i]],
        )

    def _count(self, truncated: bool, unlocated: int, dropped: int) -> None:
        self.dropped_messages += dropped
        if truncated:
            if not self.truncated_targets:
                logger.warning("a sample's target turns do not fit in max_length=%d; its end is cut (flagged "
                               "truncated_target)", self.max_length)
            self.truncated_targets += 1
        if unlocated:
            if not self.unlocated_targets:
                logger.warning("the chat template hides a target turn's text; that turn gets no labels")
            self.unlocated_targets += unlocated

    def _encode_or_fail(self, chat: list[dict[str, Any]], targets: list[int]) -> _Encoded:
        try:
            return self._encode(chat, targets)
        except _TemplateFailed as exc:
            raise ConfigError(f"the tokenizer's chat template cannot render this sample: {exc}") from None

    def _encode(self, chat: list[dict[str, Any]], targets: list[int]) -> _Encoded:
        text = self._render(chat)
        enc = self.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        ids = [int(i) for i in enc["input_ids"]]
        offsets = enc["offset_mapping"]
        labels = [IGNORE_INDEX] * len(ids)
        prefixes: dict[tuple[int, bool], str | None] = {(len(chat), False): text}
        # Last target first: a fallback search then looks only before the later target's span.
        chars: dict[int, tuple[int, int]] = {}
        limit = len(text)
        for k in reversed(targets):
            span = self._prefix_span(chat, k, text, prefixes) or _find_span(chat[k], text, limit)
            if span is not None:
                chars[k] = span
                limit = span[0]
        spans: list[tuple[int, int]] = []
        for k in targets:
            a, b = chars.get(k, (0, 0))
            tokens = [i for i, (s, e) in enumerate(offsets) if s < b and e > a]
            for i in tokens:
                labels[i] = ids[i]
            if tokens:
                spans.append((tokens[0], tokens[-1] + 1))
        return _Encoded(ids, labels, spans, len(targets) - len(spans))

    def _prefix_span(self, chat: list[dict[str, Any]], k: int, text: str,
                     prefixes: dict[tuple[int, bool], str | None]) -> tuple[int, int] | None:
        """Characters of message k: from the end of the templated chat[:k] (after the assistant header
        when the template's generation prompt is that header) to the end of the templated chat[:k+1]."""
        def prefix(n: int, generation_prompt: bool = False) -> str | None:
            if (n, generation_prompt) not in prefixes:
                rendered = self._try_render(chat[:n], generation_prompt)
                prefixes[(n, generation_prompt)] = "" if rendered is None and n == 0 else rendered
            return prefixes[(n, generation_prompt)]

        before, upto = prefix(k), prefix(k + 1)
        if before is None or upto is None or not text.startswith(upto) or not upto.startswith(before):
            return None
        start = len(before)
        if chat[k]["role"] == "assistant":
            header = prefix(k, True)
            if header is not None and len(before) <= len(header) < len(upto) and upto.startswith(header):
                start = len(header)
        return start, len(upto)

    # -- batches -------------------------------------------------------------------------------

    def __call__(self, batch: Mapping[str, Any] | None) -> dict[str, Any] | None:
        """Tokenize a collated batch (or one dataset item); other keys pass through. None stays None."""
        if batch is None:
            return None
        missing = [k for k in _SAMPLE_KEYS if k not in batch]
        if missing:
            raise ValueError(f"the batch has no {missing}; build it with RecipeDataset and collate")
        messages = batch["messages"]
        single = not messages or not isinstance(messages[0], list)
        columns = [[batch[k]] if single else batch[k] for k in _SAMPLE_KEYS]
        samples = [self.encode(m, s, t) for m, s, t in zip(*columns, strict=True)]
        out = {k: v for k, v in batch.items() if k not in _SAMPLE_KEYS}
        out.update(self.pad(samples))
        return out

    def pad(self, samples: Sequence[TokenizedSample]) -> dict[str, Any]:
        """Pad to the longest sample (the tokenizer's padding side); labels pad with IGNORE_INDEX."""
        longest = max((len(s.input_ids) for s in samples), default=0)
        tok = self.tokenizer
        pad_id = next((int(i) for i in (tok.pad_token_id, tok.eos_token_id) if i is not None), 0)
        left = getattr(tok, "padding_side", "right") == "left"
        ids, mask, labels = [], [], []
        for s in samples:
            n = longest - len(s.input_ids)
            ids.append(_pad(s.input_ids, pad_id, n, left))
            mask.append(_pad([1] * len(s.input_ids), 0, n, left))
            labels.append(_pad(s.labels, IGNORE_INDEX, n, left))
        out: dict[str, Any] = {
            "input_ids": ids,
            "attention_mask": mask,
            "labels": labels,
            "predict_actions": [s.predict_actions for s in samples],
            "truncated_target": [s.truncated_target for s in samples],
        }
        if self.return_tensors == "pt":
            out = _to_tensors(out)
        out["image_keys"] = [s.image_keys for s in samples]
        return out


def _tool_call(call: Any) -> dict[str, Any]:
    """A tool call in the shape chat templates read: arguments as a dict (JSON text is parsed)."""
    function = dict(call.get("function") or {}) if isinstance(call, Mapping) else {}
    arguments = function.get("arguments")
    if isinstance(arguments, str):
        with contextlib.suppress(ValueError):  # not JSON: the template gets the text as it is
            arguments = json.loads(arguments)
    return {"type": "function", "function": {"name": function.get("name"), "arguments": arguments or {}}}


def _is_say(call: Mapping[str, Any]) -> bool:
    return call["function"]["name"] == "say" and isinstance(call["function"]["arguments"], dict)


def _drop_order(chat: Sequence[Mapping[str, Any]], targets: list[int], protected: set[int]) -> list[int]:
    """Context messages to drop, first to last: after the last target, then from the left, head last.

    The head is the first system message and the first user message (the task, usually).
    """
    last = max(targets, default=len(chat) - 1)
    head = {next((i for i, m in enumerate(chat) if m["role"] == role), -1) for role in ("system", "user")}
    free = [i for i in range(len(chat)) if i not in protected]
    return ([i for i in free if i > last] + [i for i in free if i < last and i not in head]
            + [i for i in free if i < last and i in head])


def _window(n: int, limit: int, spans: list[tuple[int, int]], truncation: Truncation) -> tuple[int, bool]:
    """(first token kept, targets cut?) for a `limit`-token window over `n` tokens."""
    if n <= limit:
        return 0, False
    if truncation == "left_context":
        first = spans[0][0] if spans else n
        last = max((e for _, e in spans), default=0)
        if n - limit <= first:
            return n - limit, False  # cut context on the left, keep the end
        if last - limit <= first:
            return max(0, last - limit), False  # also cut what follows the targets
    return 0, any(e > limit for _, e in spans)


def _find_span(message: Mapping[str, Any], text: str, limit: int) -> tuple[int, int] | None:
    """The characters of `text[:limit]` holding the message's texts and tool-call arguments, searched
    backwards (context before a target may repeat the target's text)."""
    content = message.get("content")
    needles = [content] if isinstance(content, str) else [b["text"] for b in content or () if b["type"] == "text"]
    for call in message.get("tool_calls") or ():
        arguments = call["function"]["arguments"]
        values = arguments.values() if isinstance(arguments, dict) else [arguments]
        needles += [v for v in values if isinstance(v, str)]
    start = end = None
    for needle in reversed([n for n in needles if n]):
        at = text.rfind(needle, 0, limit)
        if at < 0:  # templates that JSON-encode arguments escape quotes and non-ASCII text
            needle = json.dumps(needle)[1:-1]
            at = text.rfind(needle, 0, limit)
        if at < 0:
            return None
        end = at + len(needle) if end is None else end
        start = limit = at
    return None if start is None or end is None else (start, end)


def _pad(values: list[int], fill: int, n: int, left: bool) -> list[int]:
    return [fill] * n + values if left else values + [fill] * n


def _to_tensors(out: dict[str, Any]) -> dict[str, Any]:
    try:
        import torch
    except ImportError as exc:
        raise MissingExtraError("torch", "train") from exc
    longs = {k: torch.tensor(out[k], dtype=torch.long) for k in ("input_ids", "attention_mask", "labels")}
    bools = {k: torch.tensor(out[k], dtype=torch.bool) for k in ("predict_actions", "truncated_target")}
    return {**longs, **bools}
