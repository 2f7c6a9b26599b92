"""The plan module end to end with a scripted VLM (a test double keyed on `purpose`), its span
algebra, its config, and the prompt loader, on the synthetic dataset and on real video."""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections import Counter
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from PIL import Image

from shared_data import shared_dataset
from steerable.annotate.context import EpisodeContext
from steerable.annotate.module import AnnotationModule, ModuleOutput
from steerable.annotate.modules.plan import KeystatePlanModule, PlanConfig, PlanModule, make_plan_module
from steerable.annotate.modules.plan.prompting import PROMPTS
from steerable.annotate.modules.plan.rows import plan_text
from steerable.annotate.modules.plan.spans import (
    Span,
    SpanReport,
    finalize_spans,
    merge_windows,
    plan_windows,
)
from steerable.dataset import LeRobotDataset, open_dataset
from steerable.errors import AnnotationError, ConfigError
from steerable.language.validate import validate_rows
from steerable.testing.scripted import ScriptedVLM

# -- fixtures and the scripted model -------------------------------------------------------------


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory: pytest.TempPathFactory) -> tuple[LeRobotDataset, dict[int, dict[str, Any]]]:
    """Two synthetic episodes (top camera, 15 fps): ep 0 has four subtasks over 12.1 s, ep 1 two over 6 s."""
    from steerable.synthetic import generate_synthetic

    root = generate_synthetic(tmp_path_factory.mktemp("syn") / "ds", episodes=2, cameras=("top",), seed=0)
    truth = json.loads((root / "meta" / "steerable_ground_truth.json").read_text())
    return open_dataset(root), {e["episode_index"]: e for e in truth["episodes"]}


def context(
    ds: LeRobotDataset, index: int, vlm: Any, *, task: str | None = None, meta: dict[str, Any] | None = None
) -> EpisodeContext:
    extra: dict[str, Any] = {"upstream_meta": meta or {}}
    if task is not None:
        extra["task"] = task
    return EpisodeContext.for_episode(ds, index, seed=0, vlm=vlm, camera=ds.camera_keys[0], **extra)


class Model:
    """Answers by `purpose` only. Segment replies come from a list of true spans: each window gets the
    spans it shows, the one in progress starting at the window's first frame (as a model would say)."""

    def __init__(self, spans: list[dict[str, Any]], windows: list[list[float]] | None = None, **replies: Any):
        self.spans = spans
        self.windows = windows
        self.replies = replies
        self.segment_calls = 0

    def __call__(self, messages: list[dict[str, Any]], schema: dict[str, Any], purpose: str) -> Any:
        if purpose == "plan.segment":
            if "segment" in self.replies:
                return self.replies["segment"]
            shown = self.windows[self.segment_calls] if self.windows else None
            self.segment_calls += 1
            if shown is None:
                return {"subtasks": [{"text": s["text"], "start": s["start"]} for s in self.spans]}
            visible = [s for s in self.spans if s["end"] > shown[0] and s["start"] <= shown[-1]]
            return {"subtasks": [{"text": s["text"], "start": max(s["start"], shown[0])} for s in visible]}
        if purpose == "plan.memory":
            if "memories" in self.replies:
                return {"memories": self.replies["memories"]}
            count = schema["properties"]["memories"]["minItems"]
            return {"memories": [f"I completed step {i + 1}." for i in range(count)]}
        return {
            "plan.task": {"task": self.replies.get("task", "sort the cubes")},
            "plan.describe": {"description": "the gripper moves cubes into bins"},
            "plan.task_aug": {"rephrasings": self.replies.get("rephrasings", ["do it please"])},
        }[purpose]


def run(module: AnnotationModule, ctx: EpisodeContext) -> ModuleOutput:
    return asyncio.run(module.run(ctx))


def by_style(rows: list[dict[str, Any]], style: str) -> list[dict[str, Any]]:
    return [r for r in rows if r["style"] == style]


def purposes(vlm: ScriptedVLM) -> list[str]:
    return [c.purpose for c in vlm.calls]


# -- end to end on the synthetic dataset ---------------------------------------------------------


def test_rows_cover_the_episode_on_stored_frames(synthetic) -> None:
    ds, truth = synthetic
    vlm = ScriptedVLM(Model(truth[0]["subtasks"]))
    ctx = context(ds, 0, vlm)
    out = run(PlanModule(), ctx)
    ts = ctx.timestamps
    subtasks = by_style(out.rows, "subtask")
    assert [r["content"] for r in subtasks] == [s["text"] for s in truth[0]["subtasks"]]
    starts = [r["timestamp"] for r in subtasks]
    # Gap-free: the first subtask starts on the first frame; each start is a distinct stored frame.
    assert starts[0] == float(ts[0]) and starts == sorted(set(starts))
    assert all(t in set(ts.tolist()) for t in starts)
    for got, true in zip(starts[1:], truth[0]["subtasks"][1:], strict=True):
        assert abs(got - true["start"]) <= 0.25 + 1e-6  # read off a 2 fps sheet
    assert validate_rows(out.rows, [], frame_timestamps=ts) == []
    assert all(r["role"] == "assistant" and r["camera"] is None for r in subtasks)
    assert out.meta == {"effective_task": truth[0]["task"]}
    # A good task is not re-derived; one call at a time; staging order task_aug, subtask, plan, memory.
    assert purposes(vlm) == ["plan.describe", "plan.segment", "plan.task_aug", "plan.memory"]
    assert vlm.stats.max_in_flight == 1
    styles = [r["style"] for r in out.rows]
    assert styles == sorted(styles, key=["task_aug", "subtask", "plan", "memory"].index)


def test_plan_and_memory_rows_follow_the_subtasks(synthetic) -> None:
    ds, truth = synthetic
    out = run(PlanModule(), context(ds, 0, ScriptedVLM(Model(truth[0]["subtasks"]))))
    subtasks = by_style(out.rows, "subtask")
    (plan,) = by_style(out.rows, "plan")
    assert plan["timestamp"] == subtasks[0]["timestamp"]
    assert plan["content"] == plan_text([r["content"] for r in subtasks])
    assert plan["content"].splitlines()[1] == "2. place the cyan cube in the blue bin"
    memories = by_style(out.rows, "memory")
    # One memory as each subtask is completed, i.e. at every boundary after the first.
    assert [m["timestamp"] for m in memories] == [r["timestamp"] for r in subtasks[1:]]
    assert [m["content"] for m in memories] == ["I completed step 1.", "I completed step 2.", "I completed step 3."]
    memory_calls = [c for c in run_calls(ds, truth) if c.purpose == "plan.memory"]
    assert len(memory_calls) == 1  # the whole chain in one call


def run_calls(ds: LeRobotDataset, truth: dict[int, dict[str, Any]]) -> list[Any]:
    vlm = ScriptedVLM(Model(truth[0]["subtasks"]))
    run(PlanModule(), context(ds, 0, vlm))
    return vlm.calls


def test_memories_fall_back_to_completed_labels(synthetic) -> None:
    ds, truth = synthetic
    vlm = ScriptedVLM(Model(truth[0]["subtasks"], memories=["I did one thing."]))  # wrong count, every try
    out = run(PlanModule(), context(ds, 0, vlm))
    memories = [m["content"] for m in by_style(out.rows, "memory")]
    assert memories[0] == "Completed so far: pick up the cyan cube."
    assert memories[2].count(";") == 2 and len(memories) == 3
    assert any("memories built from the subtask labels" in n for n in out.notes)


def test_emit_flags_turn_rows_off(synthetic) -> None:
    ds, truth = synthetic
    config = PlanConfig(emit_plan=False, emit_memory=False, n_task_rephrasings=0, subtask_describe_first=False)
    vlm = ScriptedVLM(Model(truth[1]["subtasks"]))
    out = run(PlanModule(config), context(ds, 1, vlm))
    assert {r["style"] for r in out.rows} == {"subtask"}
    assert purposes(vlm) == ["plan.segment"]


def test_rephrasings_are_cleaned_deduplicated_and_capped(synthetic) -> None:
    ds, truth = synthetic
    task = truth[1]["task"]
    assert task == "place the red cube in the right zone"
    offered = [
        "'Place the red cube in the right zone.'",  # the task itself, quoted
        "Could you move the red cube to the right zone?",
        "Move red cube to right zone",
        "move the red cube to the right zone.",  # same words as the previous one
        "",
        "Set the red cube down in the right zone",
        "Drop the red cube into the right zone",  # beyond n=3
    ]
    vlm = ScriptedVLM(Model(truth[1]["subtasks"], rephrasings=offered))
    out = run(PlanModule(PlanConfig(n_task_rephrasings=3)), context(ds, 1, vlm))
    rows = by_style(out.rows, "task_aug")
    assert [r["content"] for r in rows] == [
        task,
        "Could you move the red cube to the right zone?",
        "Move red cube to right zone",
        "Set the red cube down in the right zone",
    ]
    assert all(r["role"] == "user" and r["timestamp"] == 0.0 for r in rows)


@pytest.mark.parametrize(
    ("mode", "task", "derived"),
    [
        ("off", "test", False),
        ("if_short", "test", True),
        ("if_short", "", True),
        ("if_short", "place the red cube in the right zone", False),
        ("always", "place the red cube in the right zone", True),
    ],
)
def test_effective_task_modes(synthetic, mode: str, task: str, derived: bool) -> None:
    ds, truth = synthetic
    config = PlanConfig(derive_task_from_video=mode, max_frames_per_prompt=10, window_overlap_s=1.0,
                        contact_sheet_frames_per_sheet=4)
    vlm = ScriptedVLM(Model(truth[1]["subtasks"], task="Put the red cube in the right zone."))
    out = run(PlanModule(config), context(ds, 1, vlm, task=task))
    effective = "Put the red cube in the right zone" if derived else task
    assert out.meta["effective_task"] == effective
    assert ("plan.task" in purposes(vlm)) is derived
    if derived:
        (call,) = [c for c in vlm.calls if c.purpose == "plan.task"]
        images = [b for b in call.messages[0]["content"] if b["type"] == "image"]
        # The whole episode, subsampled to max_frames_per_prompt (10 frames on sheets of 4).
        assert len(images) == 3 and all(isinstance(b["image"], Image.Image) for b in images)
    if effective:
        assert by_style(out.rows, "task_aug")[0]["content"] == effective


def test_underivable_task_keeps_the_dataset_task(synthetic) -> None:
    ds, truth = synthetic
    vlm = ScriptedVLM(Model(truth[1]["subtasks"], task="  "))
    out = run(PlanModule(), context(ds, 1, vlm, task="debug"))
    assert out.meta["effective_task"] == "debug"
    assert any("no task could be read from the video" in n for n in out.notes)


def test_long_episode_is_windowed_and_merged(synthetic) -> None:
    ds, truth = synthetic
    config = PlanConfig(max_frames_per_prompt=10, window_overlap_s=1.5)
    ctx = context(ds, 0, None)
    sampled = ctx.sample_times(config.frames_per_second)
    windows = plan_windows(sampled, config.max_frames_per_prompt, config.overlap_frames())
    assert len(windows) == 4
    ctx.vlm = vlm = ScriptedVLM(Model(truth[0]["subtasks"], windows=windows))
    out = run(PlanModule(config), ctx)
    assert Counter(purposes(vlm))["plan.segment"] == 4 and Counter(purposes(vlm))["plan.describe"] == 4
    subtasks = by_style(out.rows, "subtask")
    # Spans cut by window edges are joined: the result is the true list, not one piece per window.
    assert [r["content"] for r in subtasks] == [s["text"] for s in truth[0]["subtasks"]]
    for got, true in zip(subtasks, truth[0]["subtasks"], strict=True):
        assert abs(got["timestamp"] - true["start"]) <= 0.25 + 1e-6
    assert "segmented in 4 overlapping windows" in out.notes
    # Each window's sheets show its frames only, badged with their own times.
    segment_calls = [c for c in vlm.calls if c.purpose == "plan.segment"]
    assert all(len([b for b in c.messages[0]["content"] if b["type"] == "image"]) == 1 for c in segment_calls)


def test_min_duration_and_max_steps_hold_on_the_result(synthetic) -> None:
    ds, truth = synthetic
    raw = [
        {"text": "a", "start": 0.0}, {"text": "blip", "start": 2.0}, {"text": "b", "start": 2.5},
        {"text": "c", "start": 4.0}, {"text": "d", "start": 6.0}, {"text": "e", "start": 9.0},
    ]
    vlm = ScriptedVLM(Model([], segment={"subtasks": raw}))
    out = run(PlanModule(PlanConfig(min_subtask_seconds=1.0, plan_max_steps=3)), context(ds, 0, vlm))
    subtasks = by_style(out.rows, "subtask")
    # blip (0.5 s) goes into its shorter neighbour b; then the shortest spans merge until 3 remain,
    # each time into the shorter neighbour, whose label survives.
    assert [(r["content"], r["timestamp"]) for r in subtasks] == [("b", 0.0), ("d", 4.0), ("e", 9.0)]
    assert any("plan_max_steps" in n for n in out.notes) and any("min_subtask_seconds" in n for n in out.notes)


def test_same_frame_starts_become_distinct_frames(synthetic) -> None:
    ds, _ = synthetic
    raw = [{"text": "a", "start": 0.0}, {"text": "b", "start": 3.0}, {"text": "c", "start": 3.0}]
    vlm = ScriptedVLM(Model([], segment={"subtasks": raw}))
    ctx = context(ds, 1, vlm)
    out = run(PlanModule(PlanConfig(min_subtask_seconds=0)), ctx)
    starts = [r["timestamp"] for r in by_style(out.rows, "subtask")]
    index = {t: i for i, t in enumerate(ctx.timestamps.tolist())}
    assert starts[1] == 3.0 and index[starts[2]] == index[starts[1]] + 1


def test_out_of_range_starts_are_clipped(synthetic) -> None:
    ds, _ = synthetic
    raw = [{"text": "b", "start": 3.0}, {"text": "a", "start": -4.0}, {"text": "c", "start": 99.0}]
    vlm = ScriptedVLM(Model([], segment={"subtasks": raw}))
    ctx = context(ds, 1, vlm)
    out = run(PlanModule(PlanConfig(min_subtask_seconds=0)), ctx)
    subtasks = by_style(out.rows, "subtask")
    assert [r["content"] for r in subtasks] == ["a", "b", "c"]
    assert subtasks[0]["timestamp"] == 0.0 and subtasks[2]["timestamp"] == 6.0  # the last sampled frame
    assert "2 start time(s) outside the frames shown clipped to them" in out.notes


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ({"subtasks": []}, "the replies listed none"),
        ({"subtasks": [{"text": " ", "start": 1.0}]}, "1 subtask item(s) without a label"),
    ],
)
def test_no_usable_subtasks_fails_the_episode_with_a_reason(synthetic, reply, reason) -> None:
    ds, _ = synthetic
    vlm = ScriptedVLM(Model([], segment=reply))
    with pytest.raises(AnnotationError, match="no usable subtasks for episode 1") as info:
        run(PlanModule(), context(ds, 1, vlm))
    assert reason in str(info.value)


def test_without_a_model_the_module_says_what_to_do(synthetic) -> None:
    ds, _ = synthetic
    with pytest.raises(AnnotationError, match="--plan.enabled=false"):
        run(PlanModule(), context(ds, 1, None))


def test_same_input_gives_the_same_rows(synthetic) -> None:
    ds, truth = synthetic
    config = PlanConfig(max_frames_per_prompt=10, window_overlap_s=1.5)
    outputs = []
    for _ in range(2):
        ctx = context(ds, 0, None)
        windows = plan_windows(ctx.sample_times(2.0), 10, config.overlap_frames())
        ctx.vlm = ScriptedVLM(Model(truth[0]["subtasks"], windows=windows))
        outputs.append(json.dumps(run(PlanModule(config), ctx).rows, sort_keys=True))
    assert outputs[0] == outputs[1]


def test_boundaries_snap_to_motion_keystates(synthetic) -> None:
    ds, truth = synthetic
    spans = truth[0]["subtasks"]
    late = [{**s, "start": s["start"] + 0.4 if i else 0.0} for i, s in enumerate(spans)]
    keystates = [{"time": s["start"], "kind": "pause"} for s in spans[1:]]
    # Read off 2 fps badges, the late boundaries land up to 0.65 s after the keystates.
    config = PlanConfig(snap_to_keystates=True, snap_tolerance_s=0.75)
    module = make_plan_module(config)
    assert isinstance(module, KeystatePlanModule) and module.requires == ("motion",)
    assert make_plan_module().requires == ()
    ctx = context(ds, 0, ScriptedVLM(Model(late)), meta={"motion": {"keystates": keystates}})
    starts = [r["timestamp"] for r in by_style(run(module, ctx).rows, "subtask")]
    assert starts[1:] == pytest.approx([s["start"] for s in spans[1:]], abs=1e-6)
    plain = run(PlanModule(), context(ds, 0, ScriptedVLM(Model(late))))
    assert by_style(plain.rows, "subtask")[1]["timestamp"] > spans[1]["start"] + 0.2
    bare = run(module, context(ds, 0, ScriptedVLM(Model(late))))
    assert any("no keystates" in n for n in bare.notes)


# -- real video ----------------------------------------------------------------------------------


def test_real_video_episode(monkeypatch: pytest.MonkeyPatch) -> None:
    ds = open_dataset(shared_dataset("lingzu_teleop_4"))
    decodes: list[int] = []
    original = ds.decode_frames

    def counting(episode_index: int, camera: str, timestamps: Any) -> list[np.ndarray]:
        decodes.append(len(timestamps))
        return original(episode_index, camera, timestamps)

    monkeypatch.setattr(ds, "decode_frames", counting)
    spans = [
        {"text": "reach toward the control box", "start": 0.0, "end": 4.0},
        {"text": "press red button", "start": 4.0, "end": 9.5},
        {"text": "retract hand", "start": 9.5, "end": 14.2},
    ]
    vlm = ScriptedVLM(Model(spans, task="press the red button on the control box"))
    ctx = context(ds, 0, vlm)
    assert ctx.task == "lingzu teleoperation"  # two words: derived under the default if_short
    out = run(PlanModule(), ctx)
    assert decodes == [29]  # 14.2 s at 2 fps, decoded once for every prompt
    assert out.meta["effective_task"] == "press the red button on the control box"
    assert [r["timestamp"] for r in by_style(out.rows, "subtask")] == [0.0, 4.0, 9.5]
    assert validate_rows(out.rows, [], frame_timestamps=ctx.timestamps) == []
    (segment,) = [c for c in vlm.calls if c.purpose == "plan.segment"]
    images = [b["image"] for b in segment.messages[0]["content"] if b["type"] == "image"]
    assert [im.size for im in images] == [(1128, 508), (1128, 508)]  # 15 + 14 tiles of 224x168


# -- span algebra ----------------------------------------------------------------------------------


@given(total=st.integers(1, 400), limit=st.integers(4, 80), overlap=st.integers(0, 40))
def test_windows_are_balanced_and_overlap(total: int, limit: int, overlap: int) -> None:
    times = [i * 0.5 for i in range(total)]
    overlap = min(overlap, (limit - 1) // 2)
    windows = plan_windows(times, limit, overlap)
    assert windows[0][0] == times[0] and windows[-1][-1] == times[-1]
    assert sorted({t for w in windows for t in w}) == times
    assert all(len(w) <= limit for w in windows)
    if len(windows) > 1:
        assert all(len(w) > limit / 2 for w in windows)  # no degenerate trailing window
        for a, b in zip(windows, windows[1:], strict=False):
            assert len(set(a) & set(b)) >= overlap and b[0] > a[0]


def test_merge_joins_an_action_cut_by_a_window_edge() -> None:
    windows = [[float(t) for t in range(0, 31)], [float(t) for t in range(24, 50)]]
    first = [Span(0.0, "pick up cup"), Span(12.0, "place cup on shelf"), Span(28.0, "pick up the bowl")]
    second = [Span(24.0, "place cup on shelf"), Span(26.0, "Pick up bowl."), Span(40.0, "place bowl")]
    merged = merge_windows([first, second], windows, SpanReport())
    # The cut is mid-overlap (t=27); the later window's span in progress joins the earlier one.
    assert merged == [Span(0.0, "pick up cup"), Span(12.0, "place cup on shelf"), Span(26.0, "Pick up bowl."),
                      Span(40.0, "place bowl")]


def test_finalize_merges_short_spans_into_the_shorter_neighbour() -> None:
    frames = np.arange(0, 20, 0.5, dtype=np.float32)
    spans = [Span(1.0, "a"), Span(6.0, "b"), Span(6.5, "blip"), Span(9.0, "c"), Span(9.0, "d")]
    report = SpanReport()
    out = finalize_spans(spans, frames, end=20.0, min_seconds=1.5, max_steps=8, report=report)
    # a starts on the first frame and d one frame after c (both said 9.0); then b (0.5 s) goes into
    # its shorter neighbour blip, and c (0.5 s) into its shorter neighbour, blip again.
    assert out == [Span(0.0, "a"), Span(6.0, "blip"), Span(9.5, "d")]
    assert report.short_merged == 2
    capped = finalize_spans(out, frames, end=20.0, min_seconds=0, max_steps=2, report=report)
    assert [s.text for s in capped] == ["a", "d"] and report.excess_merged == 1


def test_finalize_drops_spans_with_no_frame_left() -> None:
    frames = np.array([0.0, 0.5, 1.0], dtype=np.float32)
    spans = [Span(0.0, "a"), Span(1.0, "b"), Span(1.0, "c")]
    report = SpanReport()
    out = finalize_spans(spans, frames, end=1.5, min_seconds=0, max_steps=8, report=report)
    assert [s.text for s in out] == ["a", "b"] and report.unplaceable == 1


# -- config, fingerprint, prompts -----------------------------------------------------------------


def test_config_names_the_bad_key() -> None:
    assert PlanConfig(derive_task_from_video="ALWAYS").derive_task_from_video == "always"
    with pytest.raises(ConfigError, match=r"plan\.derive_task_from_video"):
        PlanConfig(derive_task_from_video="sometimes")
    with pytest.raises(ConfigError, match="window_overlap_s must be shorter than half a window"):
        PlanConfig(window_overlap_s=20)
    with pytest.raises(ConfigError, match=r"plan\.contact_sheet_quality"):
        PlanConfig(contact_sheet_quality=0)
    with pytest.raises(ConfigError, match=r"plan\.no_such_flag"):
        PlanConfig(no_such_flag=1)


def test_fingerprint_tracks_config_prompts_and_model() -> None:
    class Named:
        model_id = "qwen-vl"

    fp = PlanModule(vlm=Named()).fingerprint()
    assert fp["model"] == "qwen-vl" and fp == PlanModule(vlm=Named()).fingerprint()
    assert PROMPTS.load("plan_segment").id in fp["prompts"] and PROMPTS.load("plan_memory").id in fp["prompts"]
    lean = PlanModule(PlanConfig(subtask_describe_first=False, derive_task_from_video="off")).fingerprint()
    assert PROMPTS.load("plan_describe").id not in lean["prompts"]
    assert PROMPTS.load("plan_task_from_video").id not in lean["prompts"]
    assert lean["config"] != fp["config"] and lean["model"] is None
    assert isinstance(PlanModule(), AnnotationModule)


def test_prompts_have_content_ids_and_strict_placeholders() -> None:
    names = PROMPTS.names()
    assert {"plan_segment", "plan_describe", "plan_memory", "plan_task_rephrasings"} <= set(names)
    for name in names:
        prompt = PROMPTS.load(name)
        assert prompt.id == f"{name}@{hashlib.sha256(prompt.text.encode()).hexdigest()[:10]}"
    memory = PROMPTS.load("plan_memory")
    assert memory.placeholders == {"task", "subtasks", "count"}
    text = memory.render(task="t", subtasks="1. a", count=2)
    assert '{"memories":' in text and "{" not in text.replace('{"memories"', "")
    with pytest.raises(ConfigError, match=r"missing \['count'\]"):
        memory.render(task="t", subtasks="1. a")
    with pytest.raises(ConfigError, match=r"unexpected \['extra'\]"):
        memory.render(task="t", subtasks="1. a", count=2, extra=1)
    known = "no prompt named 'nope' in steerable.annotate.modules.plan; known prompts: .*plan_segment"
    with pytest.raises(ConfigError, match=known):
        PROMPTS.load("nope")
