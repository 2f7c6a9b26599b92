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

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from annotate_helpers import steerable
from language_rows import row
from lerobot_oracle import lerobot_recipe, render_sample, training_step
from steerable.dataset import open_dataset
from steerable.dataset.writer import EpisodeLanguage, write_language
from steerable.errors import RecipeError
from steerable.language import speech_row
from steerable.recipes import load_recipe, parse_recipe
from steerable.recipes.render import FrameRenderer, RenderOptions, drawn_component, render_sample_reference
from steerable.synthetic import generate_synthetic
from steerable.train.samples import DatasetRenderer, Fallback, episode_timeline

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
    import datasets  # the reference loads with HF datasets
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
            assert compat is None and default is not None
            assert default.messages[-1]["tool_calls"][0]["type"] == "function"
    assert set(coincide) <= set(differing)


def _repeat_timestamp(root: Path, row: int) -> None:
    """Store frame `row` of the (one-file) dataset with the timestamp of the frame before it, as a
    recording that repeats a clock reading does; every other column, type and row group is kept."""
    (path,) = sorted((root / "data").rglob("*.parquet"))
    table = pq.read_table(path)
    stamps = table.column("timestamp").to_pylist()
    stamps[row] = stamps[row - 1]
    column = table.schema.get_field_index("timestamp")
    table = table.set_column(column, table.schema.field(column), pa.array(stamps, pa.float32()))
    groups = pq.ParquetFile(path).metadata.num_row_groups
    assert groups == 1
    pq.write_table(table, path)


def test_frames_that_share_a_timestamp_keep_their_own_events(tmp_path: Path) -> None:
    """Two frames stored with the same timestamp: the interjection and its `say` reply sit on the
    first; the second, drawing `user_interjection_response`, holds no events. The reference renders
    each frame from its own rows, so the second renders nothing; events keyed by timestamp gave it
    its neighbour's interjection and reply (the sample with the `say` target)."""
    root = generate_synthetic(tmp_path / "ds", episodes=1, cameras=("top", "wrist"), seed=3)
    ds = open_dataset(root)
    indices = [int(i) for i in ds.read_episode(0, ["index"]).column("index").to_pylist()]
    second = _frames_drawing("user_interjection_response", indices, 1, len(indices))[0]
    _repeat_timestamp(root, second)
    ds = open_dataset(root)
    ts = [float(t) for t in ds.episode_timestamps(0)]
    assert ts[second] == ts[second - 1]
    persistent = [row("subtask", "reach", ts[0]), row("plan", "1. reach", ts[0]), row("memory", "nothing yet", ts[0])]
    events = [(ts[second], row("interjection", "gently, please", role="user")), (ts[second], speech_row("Sure."))]
    write_language(ds, {0: EpisodeLanguage(persistent, events)})
    stored = pq.read_table(sorted((root / "data").rglob("*.parquet"))[0]).column("language_events").to_pylist()
    assert len(stored[second - 1]) == 2 and stored[second] == []  # the rows sit on the first of the two

    recipe = lerobot_recipe(yaml.safe_load((BUILTIN / "subtask_mem_vqa_speech.yaml").read_text()), CAMERAS)
    frames = _reference_frames(root)
    expected = [
        render_sample(recipe, f["language_persistent"], f["language_events"], f["timestamp"], f["index"], f["task"])
        for f in frames
    ]
    assert expected[second] is None
    ours = _render_json(root, "subtask_mem_vqa_speech", "--compat", "lerobot")
    assert [_as_sample(x) for x in ours] == expected
    # The default mode reads the frames the same way: the reply trains on its own frame only.
    default = {x["index"]: x for x in _render_json(root, "subtask_mem_vqa_speech")}
    said = [i for i, x in default.items() if any(m.get("tool_calls") for m in x["messages"] or ())]
    assert indices[second] not in said


@settings(max_examples=60, deadline=None)
@given(
    cells=st.lists(
        st.tuples(st.booleans(), st.sampled_from(["none", "interjection", "say", "both", "vqa"])),
        min_size=2, max_size=12,
    ),
    base=st.integers(0, 10_000),
)
def test_each_frame_renders_from_its_own_events_whatever_the_timestamps(
    cells: list[tuple[bool, str]], base: int
) -> None:
    """`episode_timeline` (the renderer's per-episode index) against the reference on every frame,
    where frames may repeat the previous frame's timestamp and carry any mix of events."""
    shapes = {
        "none": [],
        "interjection": [row("interjection", "wait", role="user")],
        "say": [speech_row("Okay.")],
        "both": [row("interjection", "wait", role="user"), speech_row("Okay.")],
        "vqa": [row("vqa", "how many?", role="user", camera=TOP), row("vqa", '{"count": 1}', camera=TOP)],
    }
    stamps: list[float] = []
    for i, (repeat, _) in enumerate(cells):
        stamps.append(stamps[-1] if repeat and stamps else i / 15)
    events = [shapes[kind] for _, kind in cells]
    indices = [base + i for i in range(len(cells))]
    persistent = [row("subtask", "reach", 0.0), row("memory", "nothing yet", 0.0)]
    recipe_data = lerobot_recipe(yaml.safe_load((BUILTIN / "subtask_mem_vqa_speech.yaml").read_text()), CAMERAS)
    recipe = load_recipe("subtask_mem_vqa_speech")
    renderer = FrameRenderer(recipe, episode_timeline(persistent, stamps, indices, events, fps=15), LEROBOT)
    for t, index, frame_events in zip(stamps, indices, events, strict=True):
        try:
            want: Any = render_sample(recipe_data, persistent, frame_events, t, index, "tidy")
        except ValueError:
            want = "ambiguous"
        try:
            got = renderer.render(t, index, "tidy")[0]
            result: Any = got and got.to_dict()
        except RecipeError:
            result = "ambiguous"
        assert result == want


def test_an_ambiguous_binding_fails_on_frames_without_events_as_in_the_reference() -> None:
    """hirobot's interjection reply reads `${plan}`; with two plan rows tied at the latest time the
    reference fails on every frame that draws it, events or not (it resolves before rendering)."""
    recipe = load_recipe("hirobot")
    recipe_data = lerobot_recipe(yaml.safe_load((BUILTIN / "hirobot.yaml").read_text()), CAMERAS)
    persistent = [row("plan", "1. reach", 0.0), row("plan", "1. grasp", 0.0), row("subtask", "reach", 0.0)]
    index = next(i for i in range(1000) if drawn_component(recipe, i, LEROBOT) == "interjection_response")
    with pytest.raises(ValueError, match="matching rows"):
        render_sample(recipe_data, persistent, [], 0.5, index, "tidy")
    with pytest.raises(RecipeError, match="plan"):
        render_sample_reference(recipe, persistent=persistent, events=[], t=0.5, sample_idx=index, task="tidy",
                                options=LEROBOT)
