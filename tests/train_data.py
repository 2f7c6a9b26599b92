"""A synthetic dataset annotated through the real writer, and a tiny chat tokenizer built in-process.

Shared by tests/test_train.py and tests/test_export.py; nothing here touches the network.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from language_rows import row
from steerable.dataset import LeRobotDataset, open_dataset
from steerable.dataset.writer import EpisodeLanguage, write_language
from steerable.language import speech_row
from steerable.synthetic import generate_synthetic

TOP, WRIST = "observation.images.top", "observation.images.wrist"


@dataclass(frozen=True)
class Annotated:
    """Where the annotations landed: per episode, the frame of each event kind."""

    root: Path
    interjection_frames: dict[int, int]
    vqa_frames: dict[int, dict[str, int]]  # episode -> camera -> frame
    subtasks: dict[int, list[tuple[int, str]]]  # episode -> [(start frame, text)]


def annotate_synthetic(root: Path, episodes: int = 3) -> Annotated:
    """Generate the synthetic dataset at `root` and write subtask/plan/memory/task_aug rows and events."""
    generate_synthetic(root, episodes=episodes, cameras=("top", "wrist"), seed=0)
    ds = open_dataset(root)
    updates: dict[int, EpisodeLanguage] = {}
    interjections: dict[int, int] = {}
    vqa: dict[int, dict[str, int]] = {}
    subtasks: dict[int, list[tuple[int, str]]] = {}
    for ep in ds.episodes:
        e = ep.episode_index
        ts = [float(t) for t in ds.episode_timestamps(e)]
        n = len(ts)
        starts = [0, n // 3, 2 * n // 3]
        names = [f"reach the cube {e}", f"grasp the cube {e}", f"place the cube {e}"]
        subtasks[e] = list(zip(starts, names, strict=True))
        jump = n // 2
        persistent = [row("subtask", name, ts[f]) for f, name in zip(starts, names, strict=True)]
        persistent += [row("memory", f"done: {names[i - 1]}", ts[starts[i]]) for i in (1, 2)]
        persistent += [row("plan", "1. reach\n2. grasp\n3. place", ts[0]),
                       row("plan", "1. grasp\n2. place gently", ts[jump])]
        persistent += [row("task_aug", f"phrasing {i} of episode {e}", ts[0], role="user") for i in range(2)]
        top_frame, wrist_frame = n // 4, 3 * n // 4
        events = [
            (ts[jump], row("interjection", "please be gentle", role="user")),
            (ts[jump], speech_row("Sure, I will place it gently.")),
            (ts[top_frame], row("vqa", "how many cubes are visible?", role="user", camera=TOP)),
            (ts[top_frame], row("vqa", '{"count": 1}', camera=TOP)),
            (ts[wrist_frame], row("vqa", "is the gripper closed?", role="user", camera=WRIST)),
            (ts[wrist_frame], row("vqa", '{"closed": true}', camera=WRIST)),
        ]
        updates[e] = EpisodeLanguage(persistent, events)
        interjections[e] = jump
        vqa[e] = {TOP: top_frame, WRIST: wrist_frame}
    write_language(ds, updates)
    return Annotated(root, interjections, vqa, subtasks)


def open_annotated(a: Annotated) -> LeRobotDataset:
    return open_dataset(a.root)


# A ChatML-style template that renders tools, tool calls, and image placeholders.
CHAT_TEMPLATE = (
    "{% if tools %}<|im_start|>system{{ '\\n' }}Tools: {{ tools | tojson }}<|im_end|>{{ '\\n' }}{% endif %}"
    "{% for m in messages %}<|im_start|>{{ m.role }}{{ '\\n' }}"
    "{% if m.content is string %}{{ m.content }}"
    "{% elif m.content %}{% for b in m.content %}"
    "{% if b.type == 'image' %}<|image|>{% elif b.type == 'text' %}{{ b.text }}{% endif %}"
    "{% endfor %}{% endif %}"
    "{% if m.tool_calls %}{% for c in m.tool_calls %}"
    "<tool_call>{{ {'name': c.function.name, 'arguments': c.function.arguments} | tojson }}</tool_call>"
    "{% endfor %}{% endif %}<|im_end|>{{ '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant{{ '\\n' }}{% endif %}"
)

# A text-only template: content must be a string (list content would render as a Python repr).
TEXT_ONLY_TEMPLATE = (
    "{% for m in messages %}### {{ m.role }}: {{ m.content }}"
    "{% if m.tool_calls %} CALL {{ m.tool_calls[0].function.name }}"
    "({{ m.tool_calls[0].function.arguments | tojson }}){% endif %}{{ '\\n' }}{% endfor %}"
)

SPECIAL_TOKENS = ["<pad>", "<|im_start|>", "<|im_end|>", "<|image|>"]


def tiny_tokenizer(template: str = CHAT_TEMPLATE) -> Any:
    """A byte-level BPE tokenizer trained in-process on a few strings, with `template` as its chat template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=SPECIAL_TOKENS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    corpus = ["reach the cube grasp the cube place the cube", "user assistant system", "please be gentle",
              "Sure, I will place it gently.", "how many cubes are visible?", "Memory: done", "Plan: 1. reach"]
    core.train_from_iterator(corpus * 20, trainer)
    tok = PreTrainedTokenizerFast(tokenizer_object=core, pad_token="<pad>", eos_token="<|im_end|>")
    tok.add_special_tokens({"additional_special_tokens": SPECIAL_TOKENS[1:]})
    tok.chat_template = template
    return tok
