"""`--compat lerobot` equals the reference renderer frame for frame, on frames where everything coincides.

The dataset puts, on one frame, an interjection and its `say` reply together with a subtask
boundary, a memory update and a plan refresh (as `steerable annotate` writes them), and on other
frames an interjection together with a VQA pair, the initial `say` at t=0 with the first plan,
and an episode with no language rows at all. The oracle is `lerobot_oracle`, a naive model of the
reference written from its spec, fed with rows loaded by HF `datasets` (the reference's loader).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
import yaml

from annotate_helpers import steerable
from lerobot_oracle import lerobot_recipe, render_sample, training_step
from steerable.dataset import open_dataset
from steerable.dataset.writer import EpisodeLanguage, write_language
from steerable.language import speech_row
from steerable.recipes import load_recipe, parse_recipe
from steerable.recipes.render import RenderOptions, drawn_component, render_sample_reference
from steerable.synthetic import generate_synthetic
from steerable.train.samples import DatasetRenderer, Fallback

TOP, WRIST = "observation.images.top", "observation.images.wrist"
LEROBOT = RenderOptions(compat="lerobot")
ALL_REFERENCE_BUT_TOOL_CALL_TEXT = RenderOptions(task_source="dataset", vqa_routing="reference",
                                                 emitted_at_match="tolerance", empty_target="keep")
BUILTIN = Path(__file__).resolve().parents[1] / "src" / "steerable" / "recipes" / "builtin"
CAMERAS = {"top": TOP, "wrist": WRIST}
EPISODES = 4  # the last one is left without language rows
# A target with no if_present: on a frame without subtask rows it renders with empty text.
UNGUARDED = """\
messages:
  - {role: user, content: "${task}", stream: high_level}
  - {role: assistant, content: "${subtask}", stream: high_level, target: true}
"""


def row(style: str | None, content: str | None, ts: float | None = None, role: str = "assistant",
        camera: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"role": role, "content": content, "style": style, "camera": camera, "tool_calls": None}
    if ts is not None:
        out["timestamp"] = ts
    return out


def _frames_drawing(component: str, indices: list[int], lo: int, hi: int) -> list[int]:
    recipe = load_recipe("subtask_mem_vqa_speech")
    return [f for f in range(lo, hi) if drawn_component(recipe, indices[f], LEROBOT) == component]


@pytest.fixture(scope="module")
def coinciding(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[int]]:
    """The dataset, and the global index of every frame where an interjection meets a refresh."""
    root = generate_synthetic(tmp_path_factory.mktemp("compat") / "ds", episodes=EPISODES, cameras=("top", "wrist"),
                              seed=3)
    ds = open_dataset(root)
    updates: dict[int, EpisodeLanguage] = {}
    coincide: list[int] = []
    for e in range(EPISODES - 1):
        table = ds.read_episode(e, ["index"])
        indices = [int(i) for i in table.column("index").to_pylist()]
        ts = [float(t) for t in ds.episode_timestamps(e)]
        n = len(ts)
        # Frames whose draw is the interjection component: the case the reference renders differently
        # if speech is lost; a memory_update draw at a boundary; the rest of the frames draw freely.
        said = _frames_drawing("user_interjection_response", indices, n // 4, n - 2)
        memory = _frames_drawing("memory_update", indices, n // 8, n // 4)
        assert len(said) >= 2 and memory, "the draw gave no frame to place the coinciding rows on"
        jump, both, boundary = said[0], said[1], memory[0]
        persistent = [row("subtask", f"reach {e}", ts[0]), row("plan", "1. reach\n2. grasp\n3. place", ts[0]),
                      row("memory", "nothing done yet", ts[0])]
        persistent += [row("task_aug", f"phrasing {i} of {e}", ts[0], role="user") for i in range(3)]
        # A subtask boundary with its memory update (drawn: memory_update).
        persistent += [row("subtask", f"grasp {e}", ts[boundary]), row("memory", f"reached {e}", ts[boundary])]
        # The interjection frame: boundary, memory, plan refresh, interjection and say, all at once.
        persistent += [row("subtask", f"place {e}", ts[jump]), row("memory", f"grasped {e}", ts[jump]),
                       row("plan", "1. place gently", ts[jump])]
        events = [
            (ts[0], speech_row(f"On it, episode {e}.")),  # the initial reply, with the t=0 plan
            (ts[jump], row("interjection", "gently, please", role="user")),
            (ts[jump], speech_row("Sure, gently.")),
            # An interjection on a VQA frame: routing takes the frame for VQA.
            (ts[both], row("interjection", "what do you see?", role="user")),
            (ts[both], speech_row("Let me look.")),
            (ts[both], row("vqa", "how many cubes?", role="user", camera=TOP)),
            (ts[both], row("vqa", '{"count": 1}', camera=TOP)),
        ]
        updates[e] = EpisodeLanguage(persistent, events)
        coincide.append(indices[jump])
    write_language(ds, updates)
    return root, coincide


def _reference_frames(root: Path) -> list[dict[str, Any]]:
    """Every frame as the reference's loader gives it (HF `datasets`), with the task string."""
    datasets = pytest.importorskip("datasets", reason="the reference loads with HF datasets (steerable[train])")
    ds = open_dataset(root)
    files = sorted(str(p) for p in (root / "data").rglob("*.parquet"))
    frames = list(datasets.Dataset.from_parquet(files, keep_in_memory=True))
    for f in frames:
        f["task"] = ds.tasks[f["task_index"]]
    return sorted(frames, key=lambda f: f["index"])


def _render_json(root: Path, recipe: str, *flags: str) -> list[dict[str, Any]]:
    result = steerable("render", str(root), "--recipe", recipe, "--all", "--json", *flags)
    assert result.returncode == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines() if line.strip()]


def _as_sample(line: dict[str, Any]) -> dict[str, Any] | None:
    if line["messages"] is None:
        return None
    return {k: line[k] for k in ("messages", "message_streams", "target_message_indices")}


def test_compat_equals_the_reference_on_frames_where_interjections_meet_refreshes(coinciding) -> None:
    root, coincide = coinciding
    recipe = lerobot_recipe(yaml.safe_load((BUILTIN / "subtask_mem_vqa_speech.yaml").read_text()), CAMERAS)
    frames = _reference_frames(root)
    expected = [
        render_sample(recipe, f["language_persistent"], f["language_events"], f["timestamp"], f["index"], f["task"])
        for f in frames
    ]
    ours = _render_json(root, "subtask_mem_vqa_speech", "--compat", "lerobot")
    assert [x["index"] for x in ours] == [f["index"] for f in frames]
    mismatched = [x["index"] for x, want in zip(ours, expected, strict=True) if _as_sample(x) != want]
    assert mismatched == []
    # The fixture does exercise the case: each coinciding frame trains the say reply.
    by_index = {x["index"]: x for x in ours}
    for index in coincide:
        last = by_index[index]["messages"][-1]
        assert last["tool_calls"][0]["function"]["arguments"]["text"] == "Sure, gently."
    # ... and the unannotated episode renders nothing without a fallback.
    empty = [x for x in ours if x["episode_index"] == EPISODES - 1]
    assert empty and all(x["messages"] is None for x in empty)


def test_compat_with_task_fallback_equals_the_reference_training_step(coinciding, tmp_path: Path) -> None:
    root, _ = coinciding
    path = tmp_path / "unguarded.yaml"
    path.write_text(UNGUARDED)
    recipe = yaml.safe_load(UNGUARDED)
    frames = _reference_frames(root)
    expected = [
        training_step(recipe, f["language_persistent"], f["language_events"], f["timestamp"], f["index"], f["task"])
        for f in frames
    ]
    ours = _render_json(root, str(path), "--compat", "lerobot", "--fallback", "task")
    assert [_as_sample(x) for x in ours] == expected
    # A frame without language rows gets the plain task, not the recipe with an empty target.
    tasks = {f["index"]: f["task"] for f in frames}
    bare = [x for x in ours if x["episode_index"] == EPISODES - 1]
    assert bare and all(x["messages"] == [{"role": "user", "content": tasks[x["index"]]}] for x in bare)


@pytest.mark.parametrize("fallback", ["none", "task"])
def test_default_mode_never_emits_a_target_with_empty_text(coinciding, fallback: Fallback) -> None:
    root, _ = coinciding
    ds = open_dataset(root)
    recipes = [parse_recipe(UNGUARDED, origin="unguarded.yaml"), load_recipe("subtask_mem_vqa_speech"),
               load_recipe("subtask_joint"), load_recipe("hirobot", camera_map={"top": TOP})]
    for recipe in recipes:
        rendered = 0
        for frame in DatasetRenderer(ds, recipe, fallback=fallback).samples():
            if frame.sample is None:
                continue
            rendered += 1
            for i in frame.sample.target_message_indices:
                message = frame.sample.messages[i]
                assert message.get("tool_calls") or (message.get("content") or "").strip(), (recipe.origin, frame)
        assert rendered


def test_tool_calls_given_as_json_text_are_skipped_in_compat_and_read_by_default(coinciding) -> None:
    """Raw Arrow values (`to_pylist()` of the `arrow.json` column) carry tool calls as JSON text.

    The reference's `tool_name=say` matcher skips them, so on the frames where an interjection meets
    a refresh its `speech` is None and the interjection component renders nothing: compat does the
    same on the same rows; the default reads the text as the call it encodes.
    """
    root, coincide = coinciding
    recipe_data = lerobot_recipe(yaml.safe_load((BUILTIN / "subtask_mem_vqa_speech.yaml").read_text()), CAMERAS)
    recipe = load_recipe("subtask_mem_vqa_speech")
    ds = open_dataset(root)
    raw = [r for p in sorted((root / "data").rglob("*.parquet")) for r in pq.read_table(p).to_pylist()]
    assert any(isinstance(c, str) for r in raw for e in r["language_events"] for c in e["tool_calls"] or [])
    differing = []
    for r in raw:
        task = ds.tasks[r["task_index"]]
        args = {"persistent": r["language_persistent"], "events": r["language_events"], "t": r["timestamp"],
                "sample_idx": r["index"], "task": task}
        compat = render_sample_reference(recipe, **args, options=LEROBOT)
        assert (compat and compat.to_dict()) == render_sample(recipe_data, r["language_persistent"],
                                                              r["language_events"], r["timestamp"], r["index"], task)
        default = render_sample_reference(recipe, **args, options=ALL_REFERENCE_BUT_TOOL_CALL_TEXT)
        if (default and default.to_dict()) != (compat and compat.to_dict()):
            differing.append(r["index"])
            assert compat is None and default is not None and default.messages[-1]["tool_calls"][0]["type"] == "function"
    assert set(coincide) <= set(differing)
