"""The interjections module on a synthetic dataset, driven by a scripted VLM (a test double)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from steerable.annotate.context import EpisodeContext
from steerable.annotate.engine import run_episodes
from steerable.annotate.module import ModuleOutput
from steerable.annotate.modules.interjections import (
    SCENARIOS,
    InterjectionsConfig,
    InterjectionsModule,
    validate_interjection_rows,
)
from steerable.annotate.modules.plan.rows import plan_rows, subtask_rows
from steerable.annotate.modules.plan.spans import Span
from steerable.annotate.staging import Staging
from steerable.dataset import LeRobotDataset, open_dataset
from steerable.errors import AnnotationError, ConfigError, VLMReplyError
from steerable.synthetic.generate import generate_synthetic
from steerable.synthetic.ground_truth import EpisodeTruth, read_ground_truth
from steerable.testing.scripted import ScriptedVLM

TOP = "observation.images.top"
EPISODES = 8


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory: pytest.TempPathFactory) -> tuple[LeRobotDataset, dict[int, EpisodeTruth]]:
    root = generate_synthetic(
        tmp_path_factory.mktemp("syn") / "ds", episodes=EPISODES, cameras=("top",), seed=5
    )
    return open_dataset(root), read_ground_truth(root)


def responder(messages: list[dict[str, Any]], schema: dict[str, Any], purpose: str) -> dict[str, Any]:
    """Answers by purpose: the scenario is in the purpose, the plan length in the schema."""
    if purpose == "interjections.acknowledge":
        return {"reply": "Sure, on it."}
    scenario = purpose.split(".", 1)[1]
    reply: dict[str, Any] = {"interjection": f"{scenario} cue", "reply": f"ok ({scenario})"}
    steps = schema["properties"].get("plan_steps")
    if steps is not None:
        reply["plan_steps"] = [f"refreshed step {i}" for i in range(steps["minItems"])]
    return reply


def truth_rows(truth: EpisodeTruth, *, with_plan: bool = True) -> list[dict[str, Any]]:
    """What the plan module stages for a perfect segmentation: subtask rows and the t0 plan."""
    spans = [Span(s.start, s.text) for s in truth.subtasks]
    return subtask_rows(spans) + (plan_rows(spans) if with_plan else [])


def context(
    ds: LeRobotDataset,
    episode: int,
    vlm: Any,
    *,
    seed: int = 0,
    upstream: dict[str, list[dict[str, Any]]] | None = None,
    keystates: list[dict[str, Any]] | None = None,
) -> EpisodeContext:
    return EpisodeContext.for_episode(
        ds,
        episode,
        seed=seed,
        vlm=vlm,
        camera=TOP,
        upstream=upstream or {},
        upstream_meta={"motion": {"keystates": keystates}} if keystates is not None else {},
    )


def run(module: InterjectionsModule, ctx: EpisodeContext) -> ModuleOutput:
    return asyncio.run(module.run(ctx))


def run_all(synthetic, config: InterjectionsConfig, *, seed: int = 0) -> dict[int, ModuleOutput]:
    ds, truths = synthetic
    module = InterjectionsModule(config)
    vlm = ScriptedVLM(responder)
    return {
        i: run(module, context(ds, i, vlm, seed=seed, upstream={"plan": truth_rows(truths[i])}))
        for i in range(EPISODES)
    }


def test_interjections_sit_on_subtask_boundaries_with_say_and_plan_refresh(synthetic) -> None:
    ds, truths = synthetic
    config = InterjectionsConfig(interjection_min_t=0.0)
    outputs = run_all(synthetic, config)
    total = 0
    for i, out in outputs.items():
        stamps = {float(t) for t in ds.episode_timestamps(i)}
        boundaries = {s.start for s in truths[i].subtasks[1:]}
        cues = [r for r in out.rows if r["style"] == "interjection"]
        total += len(cues)
        assert len(cues) == min(3, len(boundaries))
        for cue in cues:
            t = cue["timestamp"]
            assert t in boundaries and t in stamps  # the stored frame value, not a recomputed float
            same_frame = [r for r in out.rows if r["timestamp"] == t]
            say = [r for r in same_frame if r["style"] is None]
            plan = [r for r in same_frame if r["style"] == "plan"]
            assert cue["role"] == "user" and cue["content"].endswith("cue")
            assert say[0]["role"] == "assistant" and say[0]["content"] is None
            assert say[0]["tool_calls"][0]["function"]["name"] == "say"
            assert say[0]["tool_calls"][0]["function"]["arguments"]["text"].startswith("ok (")
            remaining = sum(1 for s in truths[i].subtasks if s.start >= t)
            assert plan[0]["content"].splitlines() == [
                f"{k + 1}. refreshed step {k}" for k in range(remaining)
            ]
        first = float(ds.episode_timestamps(i)[0])
        ack = [r for r in out.rows if r["timestamp"] == first]
        assert [r["tool_calls"][0]["function"]["arguments"]["text"] for r in ack] == ["Sure, on it."]
        merged = truth_rows(truths[i]) + out.rows
        assert validate_interjection_rows(merged, has_plan=True) == []
    assert total > 0


def test_choice_of_times_and_scenarios_is_deterministic_per_seed_and_episode(synthetic) -> None:
    config = InterjectionsConfig(interjection_min_t=0.0)
    first = run_all(synthetic, config, seed=7)
    again = run_all(synthetic, config, seed=7)
    other = run_all(synthetic, config, seed=8)
    assert {i: o.rows for i, o in first.items()} == {i: o.rows for i, o in again.items()}
    assert {i: o.meta for i, o in first.items()} != {i: o.meta for i, o in other.items()}


def test_all_four_hi_robot_scenarios_are_used_and_shown_to_the_model(synthetic) -> None:
    ds, truths = synthetic
    vlm = ScriptedVLM(responder)
    module = InterjectionsModule(InterjectionsConfig(interjection_min_t=0.0))
    seen: list[str] = []
    for i in range(EPISODES):
        out = run(module, context(ds, i, vlm, upstream={"plan": truth_rows(truths[i])}))
        scenarios = [m["scenario"] for m in out.meta["interjections"]]
        assert len(set(scenarios)) == len(scenarios)  # an episode cycles through kinds before repeating
        seen += scenarios
    assert set(seen) == set(SCENARIOS)
    calls = [c for c in vlm.calls if c.purpose != "interjections.acknowledge"]
    negative = next(c for c in calls if c.purpose == "interjections.negative_task")
    text = negative.messages[0]["content"][-1]["text"]
    assert "NOT to do" in text and "negative task" in text
    # The visual window: four frames of the default camera around the boundary.
    images = [b for b in negative.messages[0]["content"] if b["type"] == "image"]
    assert len(images) == 4 and images[0]["image"].shape == (160, 224, 3)


def test_restricting_scenarios_and_count(synthetic) -> None:
    outputs = run_all(
        synthetic,
        InterjectionsConfig(
            scenarios=["preference"], max_interjections_per_episode=1, interjection_min_t=0.0
        ),
    )
    kinds = [m["scenario"] for o in outputs.values() for m in o.meta["interjections"]]
    assert (
        kinds
        and set(kinds) == {"preference"}
        and all(len(o.meta["interjections"]) <= 1 for o in outputs.values())
    )


def test_with_plan_off_boundaries_come_from_keystates_and_no_plan_is_written(synthetic) -> None:
    ds, truths = synthetic
    module = InterjectionsModule(InterjectionsConfig())
    vlm = ScriptedVLM(responder)
    episode = max(truths, key=lambda i: len(truths[i].gripper_events))
    keystates = [{"time": e.time, "kind": f"gripper_{e.kind}"} for e in truths[episode].gripper_events]
    out = run(module, context(ds, episode, vlm, keystates=keystates))
    times = sorted(r["timestamp"] for r in out.rows if r["style"] == "interjection")
    eligible = [k["time"] for k in keystates if k["time"] >= 2.0]
    assert times and set(times) <= set(eligible)
    assert not [r for r in out.rows if r["style"] == "plan"]
    assert out.meta["plan_refresh"] is False and any("keystates" in n for n in out.notes)
    assert validate_interjection_rows(out.rows, has_plan=False) == []
    cue_call = next(c for c in vlm.calls if c.purpose != "interjections.acknowledge")
    prompt = cue_call.messages[0]["content"][-1]["text"]
    assert "plan_steps" not in prompt and "not labelled" in prompt

    # No keystates either: even splits of the episode, still on stored frame times.
    bare = run(module, context(ds, episode, vlm))
    stamps = {float(t) for t in ds.episode_timestamps(episode)}
    cues = [r["timestamp"] for r in bare.rows if r["style"] == "interjection"]
    assert cues and set(cues) <= stamps and all(t >= 2.0 for t in cues)
    assert any("even splits" in n for n in bare.notes)


def test_subtasks_without_plan_rows_give_no_refresh(synthetic) -> None:
    ds, truths = synthetic
    i = max(truths, key=lambda k: len(truths[k].subtasks))
    out = run(
        InterjectionsModule(InterjectionsConfig(interjection_min_t=0.0)),
        context(ds, i, ScriptedVLM(responder), upstream={"plan": truth_rows(truths[i], with_plan=False)}),
    )
    assert [r for r in out.rows if r["style"] == "interjection"]
    assert not [r for r in out.rows if r["style"] == "plan"]
    assert validate_interjection_rows(out.rows, has_plan=False) == []


class LooseVLM:
    """A fake client that skips schema validation, to reach the module's own checks."""

    def __init__(self, reply: dict[str, Any]) -> None:
        self.reply = reply

    async def generate_json(
        self, messages: Any, schema: Any, *, affinity: Any = None, purpose: str = ""
    ) -> Any:
        return {"reply": "ok"} if purpose.endswith("acknowledge") else self.reply


def test_a_refreshed_plan_of_the_wrong_length_costs_only_that_interjection(synthetic) -> None:
    """The reply is read into the model its schema came from: a plan of the wrong length is refused
    like any schema violation (a real client re-asks first), and only that interjection is dropped."""
    ds, truths = synthetic
    i = max(truths, key=lambda k: len(truths[k].subtasks))
    vlm = LooseVLM({"interjection": "not that one", "reply": "right", "plan_steps": ["only one", "two", "three"]})
    out = run(
        InterjectionsModule(InterjectionsConfig(interjection_min_t=0.0)),
        context(ds, i, vlm, upstream={"plan": truth_rows(truths[i])}),
    )
    kept = [r for r in out.rows if r["style"] == "interjection"]
    dropped = [n for n in out.notes if "an interjection was dropped: its call failed" in n]
    assert dropped and len(kept) + len(dropped) == len(out.meta["interjections"])
    for plan in (r for r in out.rows if r["style"] == "plan"):  # only where three steps remained
        assert plan["content"] == "1. only one\n2. two\n3. three"
    assert [r for r in out.rows if r["style"] is None]  # the acknowledgement is still there


def test_empty_replies_skip_the_interjection_not_the_episode(synthetic) -> None:
    ds, truths = synthetic
    out = run(
        InterjectionsModule(InterjectionsConfig(interjection_min_t=0.0)),
        context(
            ds, 0, LooseVLM({"interjection": "  ", "reply": "ok"}), upstream={"plan": truth_rows(truths[0])}
        ),
    )
    assert not [r for r in out.rows if r["style"] == "interjection"]
    assert any("an interjection was dropped" in n for n in out.notes)


class DeadVLM:
    """A fake client whose every call fails after its retries (a server that never answers)."""

    async def generate_json(self, messages: Any, schema: Any, *, affinity: Any = None, purpose: str = "") -> Any:
        raise VLMReplyError("no reply", reason="no reply within 5s", purpose=purpose)


def test_every_call_failed_fails_the_module_instead_of_an_empty_output(synthetic) -> None:
    """An empty output would be staged as done and resumed; a module that got nothing has failed."""
    ds, truths = synthetic
    module = InterjectionsModule(InterjectionsConfig(interjection_min_t=0.0))
    with pytest.raises(AnnotationError, match=r"every one of its \d+ VLM calls failed \(.*no reply within 5s"):
        run(module, context(ds, 0, DeadVLM(), upstream={"plan": truth_rows(truths[0])}))


def test_validator_reports_missing_say_missing_refresh_and_ambiguous_plans() -> None:
    cue = {"role": "user", "content": "not the red one", "style": "interjection", "timestamp": 3.2}
    say = {
        "role": "assistant",
        "content": None,
        "style": None,
        "timestamp": 3.2,
        "tool_calls": [{"type": "function", "function": {"name": "say", "arguments": {"text": "ok"}}}],
    }
    plan = {"role": "assistant", "content": "1. a", "style": "plan", "timestamp": 3.2}
    assert validate_interjection_rows([cue, say, plan], has_plan=True) == []
    assert validate_interjection_rows([cue, say], has_plan=False) == []
    assert "no `say` reply" in validate_interjection_rows([cue, plan], has_plan=True)[0]
    assert "no plan row" in validate_interjection_rows([cue, say], has_plan=True)[0]
    assert "2 plan rows" in validate_interjection_rows([cue, say, plan, plan], has_plan=True)[0]
    assert "empty content" in validate_interjection_rows([{**cue, "content": ""}], has_plan=False)[0]


def test_bad_settings_and_missing_vlm_give_clear_errors(synthetic) -> None:
    with pytest.raises(ConfigError, match="interjections.scenarios"):
        InterjectionsConfig(scenarios=["sarcasm"])
    with pytest.raises(ConfigError, match="at least one scenario"):
        InterjectionsConfig(scenarios=[])
    with pytest.raises(ConfigError, match="max_interjections_per_episode"):
        InterjectionsConfig(max_interjections_per_episode=-1)
    ds, _ = synthetic
    with pytest.raises(AnnotationError, match="needs a VLM"):
        run(InterjectionsModule(InterjectionsConfig()), context(ds, 0, None))


def test_fingerprint_follows_config_and_prompts() -> None:
    a = InterjectionsModule(InterjectionsConfig()).fingerprint()
    assert a == InterjectionsModule(InterjectionsConfig()).fingerprint()
    assert a != InterjectionsModule(InterjectionsConfig(max_interjections_per_episode=1)).fingerprint()
    assert any(p.startswith("interjection_cue@") for p in a["prompts"])


class TruthPlan:
    """Stands in for the plan module: stages the ground-truth subtasks."""

    name = "plan"
    requires: tuple[str, ...] = ()

    def __init__(self, truths: dict[int, EpisodeTruth]) -> None:
        self.truths = truths

    def fingerprint(self) -> dict[str, Any]:
        return {"truth": True}

    async def run(self, ctx: EpisodeContext) -> ModuleOutput:
        return ModuleOutput(rows=truth_rows(self.truths[ctx.episode_index]))


def test_staged_through_the_engine_and_resumed(synthetic, tmp_path: Path) -> None:
    ds, truths = synthetic
    vlm = ScriptedVLM(responder)
    modules = [TruthPlan(truths), InterjectionsModule(InterjectionsConfig(interjection_min_t=0.0))]
    staging = Staging(tmp_path / "staging")

    def go() -> list[Any]:
        return asyncio.run(
            run_episodes(ds, ds.episodes[:3], modules, staging, seed=1, vlm=vlm, camera=TOP, parallelism=3)
        )

    first = go()
    assert all(r.failure is None for r in first)
    calls = len(vlm.calls)
    second = go()
    assert len(vlm.calls) == calls and all(r.reused == ["plan", "interjections"] for r in second)
    assert [r.outputs["interjections"].rows for r in second] == [
        r.outputs["interjections"].rows for r in first
    ]
    # Every episode's rows still validate after the round trip through staging files.
    for r in second:
        merged = r.outputs["plan"].rows + r.outputs["interjections"].rows
        assert validate_interjection_rows(merged, has_plan=True) == []
