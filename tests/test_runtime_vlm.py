"""The VLM planner against a real OpenAI-compatible HTTP server: recipe prompts, garbage, timeouts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from annotate_helpers import steerable
from steerable.control import LanguageContext, Observation
from steerable.errors import ConfigError
from steerable.runtime.loop import LoopRates, Runtime, RuntimeEvent
from steerable.runtime.prompts import RecipePrompts
from steerable.runtime.vlm_planner import VLMPlanner
from steerable.synthetic import ScriptedController, SimEnv
from steerable.testing.server import TestServer
from steerable.testing.server.faults import FaultPlan
from steerable.tools import load_tools
from steerable.vlm.config import VLMConfig

TASK = "put the red cube in the left bin"


def _text(messages: list[dict[str, Any]]) -> str:
    parts = []
    for m in messages:
        content = m.get("content")
        parts += [content] if isinstance(content, str) else [b.get("text", "") for b in content or []]
    return " | ".join(parts)


class FakeVLM:
    """Answers like a fine-tuned model would, from the prompt text alone (a test responder)."""

    def __init__(self) -> None:
        self.prompts: list[tuple[list[dict[str, Any]], dict[str, Any] | None]] = []

    def __call__(self, messages: list[dict[str, Any]], schema: dict[str, Any] | None) -> Any:
        self.prompts.append((messages, schema))
        props = (schema or {}).get("properties", {})
        if "answer" in props:
            return {"answer": "The red cube is on the table."}
        if "memory" in props:
            return {"memory": "The red cube is picked up."}
        if "speech" in props:
            return {"speech": "OK, the right bin.", "subtask": "place it in the yellow bin"}
        return {"subtask": "pick up the red cube", "plan": "1. pick up the red cube\n2. place it in the blue bin"}


def _runtime(url: str, **vlm: Any) -> tuple[Runtime, list[RuntimeEvent]]:
    env = SimEnv()
    env.reset(7, TASK)
    planner = VLMPlanner.from_config(VLMConfig(base_url=url, model_id="test-model", backend="openai", **vlm))
    rt = Runtime(env, ScriptedController(), planner, tools=load_tools({}), rates=LoopRates(ctrl_hz=15))
    events: list[RuntimeEvent] = []
    rt.listeners.append(events.append)
    return rt, events


def test_prompts_follow_the_recipe_layout() -> None:
    prompts = RecipePrompts.load("subtask_mem_vqa_speech")
    ctx = LanguageContext(task=TASK, subtask="pick up the red cube", memory="nothing yet")
    frame = np.full((4, 4, 3), 7, dtype=np.uint8)
    obs = Observation(np.zeros(4), images={"observation.images.top": frame, "observation.images.wrist": frame})
    assert prompts.render("subtask", ctx, obs) == [{"role": "user", "content": TASK}]
    assert prompts.render("memory", ctx, obs, new_subtask="place it in the blue bin") == [
        {"role": "user", "content": TASK},
        {"role": "assistant", "content": "Memory so far: nothing yet"},
        {"role": "user", "content": "Just finished: pick up the red cube"},
    ]
    assert prompts.render("speech", ctx, obs, user_text="no, the right bin") == [
        {"role": "user", "content": TASK}, {"role": "user", "content": "no, the right bin"}]
    vqa = prompts.render("vqa", ctx, obs, user_text="where is the red cube?")
    assert vqa[0]["content"][0]["image"] is frame and vqa[0]["content"][1]["text"] == "where is the red cube?"
    with pytest.raises(ConfigError, match="no high-level component whose target is the subtask"):
        RecipePrompts.load("motion")


def test_vlm_planner_drives_the_simulator_and_handles_interjections_and_questions() -> None:
    vlm = FakeVLM()
    with TestServer(responder=vlm) as server:
        rt, events = _runtime(server.url)
        rt.submit("task", TASK)
        rt.run(max_ticks=40)
        assert rt.state.context["subtask"] == "pick up the red cube"
        assert vlm.prompts[0][0] == [{"role": "user", "content": TASK}]
        rt.submit("interject", "no, the right bin")
        rt.submit("ask", "where is the red cube?")
        rt.run(max_ticks=5)
    kinds = {(e.kind, e.text) for e in events}
    assert ("speech", "OK, the right bin.") in kinds and ("subtask", "place it in the yellow bin") in kinds
    assert ("answer", "The red cube is on the table.") in kinds
    assert rt.high.name == "VLM planner (test-model)"  # type: ignore[union-attr]
    assert any("no, the right bin" in _text(m) for m, _ in vlm.prompts)
    assert rt.state.actions_dispatched > 0


@pytest.mark.parametrize("fault", ["invalid_json", "timeout"])
def test_garbage_or_timeouts_hold_the_robot_still_tell_the_operator_and_the_loop_goes_on(fault: str) -> None:
    plan = FaultPlan(script=[fault, fault], timeout_s=3.0)
    with TestServer(responder=FakeVLM(), faults=plan) as server:
        rt, events = _runtime(server.url, max_retries=0, timeout_s=0.5)
        rt.submit("task", TASK)
        start = rt.env.observe(render=False).state.copy()
        rt.run(max_ticks=14)  # two failed calls (0 s, then the 1 Hz retry): nothing may move
        assert np.array_equal(rt.env.observe(render=False).state, start)
        warnings = [e.text for e in events if e.kind == "warn"]
        assert len(warnings) == 1 and "VLM planner (test-model) failed" in warnings[0]
        assert "holding still" in warnings[0]
        rt.run(max_ticks=40)  # the server answers again: the robot moves
    assert rt.state.context["subtask"] == "pick up the red cube"
    assert not np.array_equal(rt.env.observe(render=False).state, start)


def test_a_wrong_model_id_or_no_server_stops_before_the_robot_moves(tmp_path: Path) -> None:
    with TestServer(responder=FakeVLM()) as server:
        wrong = steerable("run", "--env", "sim", "--high_level", "vlm", "--vlm.base_url", server.url,
                          "--vlm.model_id", "nope", "--task", TASK, "--record", str(tmp_path / "a"))
    down = steerable("run", "--env", "sim", "--high_level", "vlm", "--vlm.base_url", "http://127.0.0.1:9/v1",
                     "--vlm.model_id", "m", "--task", TASK, "--record", str(tmp_path / "b"))
    for done, says in ((wrong, "fix --vlm.model_id"), (down, "cannot reach the VLM server")):
        assert done.returncode == 2, done.stderr
        assert says in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert "task:" not in done.stdout  # nothing ran
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
