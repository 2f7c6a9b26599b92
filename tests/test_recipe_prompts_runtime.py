"""The runtime asks a trained policy with the prompts of the checkpoint's own recipe: every question,
token for token what training rendered for the same context; a question the recipe does not train
is not asked; and the redo after a failed step check reads no word of a step."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from policy_helpers import build, one_thread  # noqa: F401  (autouse fixture)
from steerable.control import HighLevelRequest, LanguageContext, Observation
from steerable.dataset import open_dataset
from steerable.errors import ConfigError, RecipeError
from steerable.policy.checkpoint import LoadedPolicy, load_policy, save_checkpoint
from steerable.policy.config import PolicyConfig
from steerable.policy.data import PolicyDataset
from steerable.policy.generation import ParsedReply
from steerable.policy.inference import PolicyRunner
from steerable.policy.names import SLOT_COMPONENTS
from steerable.recipes import load_recipe, parse_recipe, rephrasing_index
from steerable.recipes.live import LivePrompts, Question
from steerable.runtime.policy_high_level import PolicyHighLevel
from steerable.synthetic import generate_synthetic
from steerable.train import collate

HIERARCHICAL = Path(load_recipe("hierarchical").origin).read_text(encoding="utf-8")
TASK = "put the red cube in the blue bin"
# A behaviour-cloning recipe: actions from the command, no text at all.
BC = """
blend:
  act:
    weight: 1.0
    messages:
      - {role: user, content: "${subtask}", stream: low_level, if_present: subtask}
"""
# Plans, and nothing else the runtime asks (no memory, no replies, no progress, no actions).
TEXT_ONLY = """
blend:
  plan:
    weight: 0.5
    messages:
      - {role: user, content: "${task}", stream: high_level}
      - {role: user, content: "Write the plan.", stream: high_level}
      - {role: assistant, content: "${plan}", stream: high_level, target: true, if_present: plan}
"""
PLAN_ONLY = TEXT_ONLY + """\
  act:
    weight: 0.5
    messages:
      - {role: user, content: "${subtask}", stream: low_level, if_present: subtask}
"""


@pytest.fixture(scope="module")
def oracle(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Three episodes with oracle language (plans, memory, subtasks), each with an interjection."""
    root = tmp_path_factory.mktemp("live") / "ds"
    generate_synthetic(root, episodes=3, seed=3, difficulty="realistic", with_language=True, interjection_rate=1.0)
    return open_dataset(root)


@pytest.fixture(scope="module")
def runner(oracle: Any) -> PolicyRunner:
    built = build(oracle, max_length=512)  # no sample is cut: the whole prompt is compared
    return PolicyRunner(LoadedPolicy(built.model, built.processor, HIERARCHICAL, Path(oracle.root)))


def _frame_context(data: PolicyDataset, item: dict[str, Any]) -> dict[str, Any]:
    """What the runtime would hold at this training frame: the task as the sample read it, the active
    and the previous plan, memory and subtask, and the frame's interjection."""
    timeline = data.frames.renderer.timeline(item["episode_index"])[0]
    t, index = item["timestamp"], item["index"]
    rephrasings = timeline.task_rephrasings
    task = (rephrasings[rephrasing_index(index, len(rephrasings))]["content"] if rephrasings else item["task"])

    def text(row: Any) -> str | None:
        return None if row is None else row.get("content")

    said = timeline.emitted_at(t, events=timeline.frame_events(t, index), style="interjection")
    return {
        "task": task,
        "plan": text(timeline.active_at(t, style="plan")), "memory": text(timeline.active_at(t, style="memory")),
        "subtask": text(timeline.active_at(t, style="subtask")),
        "prior_plan": text(timeline.nth_prev(t, style="plan")),
        "prior_memory": text(timeline.nth_prev(t, style="memory")),
        "finished": text(timeline.nth_prev(t, style="subtask")), "interjection": text(said),
    }


# question -> (the hierarchical component that trains it, the live context the runtime asks it with)
_ASKED: dict[str, tuple[str, Any]] = {
    "plan": ("plan", lambda c: (LanguageContext(task=c["task"], memory=c["memory"]), {})),
    "subtask": ("high_level_subtask", lambda c: (
        LanguageContext(task=c["task"], plan=c["plan"], memory=c["memory"]), {})),
    "progress": ("progress", lambda c: (LanguageContext(task=c["task"]), {})),
    "memory": ("memory_update", lambda c: (
        LanguageContext(task=c["task"], subtask=c["finished"], memory=c["prior_memory"]), {})),
    "plan_update": ("plan_update", lambda c: (
        LanguageContext(task=c["task"], subtask=c["finished"], plan=c["prior_plan"]), {})),
    "interjection": ("interjection_response", lambda c: (
        LanguageContext(task=c["task"], plan=c["prior_plan"]), {"user_text": c["interjection"]})),
    "action": ("low_level_execution", lambda c: (LanguageContext(subtask=c["subtask"]), {})),
}


def _training_items(oracle: Any, runner: PolicyRunner, component: str) -> list[dict[str, Any]]:
    """Training items of `component` (renamed where training renames them), the richest first."""
    recipe, cfg, size = load_recipe("hierarchical"), runner.cfg, runner.processor.image_size
    if component == "interjection_response":  # event frames: the reply component's repeats
        data = PolicyDataset(oracle, recipe, cfg, size, event_repeat=1)
        found = [data[i] for i in range(len(data.positions), len(data.positions) + len(data.extra))]
    else:
        data = PolicyDataset(oracle, recipe, cfg, size, component=component)
        found = [data[i] for i in range(0, len(data.positions), 7)]
    rendered = [item for item in found if item is not None]
    assert rendered, component
    return [{**item, "data": data} for item in sorted(rendered, key=lambda x: -len(x["messages"]))[:3]]


@pytest.mark.parametrize("question", list(_ASKED))
def test_each_question_is_asked_token_for_token_as_training_rendered_it(oracle: Any, runner: PolicyRunner,
                                                                       question: Question) -> None:
    component, asked = _ASKED[question]
    for item in _training_items(oracle, runner, component):
        context, given = asked(_frame_context(item.pop("data"), item))
        batch = runner.processor.training_batch(collate([item]))
        trained = batch["input_ids"][0][batch["attention_mask"][0].bool()].tolist()
        labels = batch["labels"][0].tolist()
        prompt = runner.prompts.render(question, context, **given)
        assert prompt.component == component
        chat = prompt.messages
        if prompt.component in SLOT_COMPONENTS and runner.slots:  # as `PolicyRunner.generate` renames
            chat = runner.slots.canonical(chat)[0]
        ids = runner.processor.prompt([chat], generation=question != "action")[0][0].tolist()
        if question == "action":
            assert ids == trained  # the whole sample: no text target
        else:
            first = next(i for i, label in enumerate(labels) if label >= 0)
            assert ids == trained[:first], (runner.processor.decode(ids), runner.processor.decode(trained[:first]))


def test_the_hierarchical_prompts_keep_the_layout_the_runtime_asked_before() -> None:
    """Same turns as the hand-written prompts the runtime used before: what a trained policy does is
    unchanged (its measured figures stand)."""
    live = LivePrompts(load_recipe("hierarchical"))
    plan, memory, step = "1. pick up the red cube\n2. place it", "Holding nothing.", "pick up the red cube"

    def turns(question: Any, context: LanguageContext, **given: Any) -> list[Any]:
        return [m["content"] for m in live.render(question, context, **given).messages]

    assert turns("plan", LanguageContext(task=TASK, memory=memory)) == [TASK, f"Memory: {memory}", "Write the plan."]
    assert turns("plan", LanguageContext(task=TASK)) == [TASK, "Write the plan."]
    assert turns("subtask", LanguageContext(task=TASK, plan=plan, memory=memory)) == [
        TASK, f"Plan:\n{plan}", f"Memory: {memory}"]
    assert turns("subtask", LanguageContext(task=TASK)) == [TASK]
    assert turns("progress", LanguageContext(task=TASK, plan=plan, subtask=step)) == [TASK, "Which step now?"]
    assert turns("memory", LanguageContext(task=TASK, subtask=step, memory=memory)) == [
        TASK, f"Memory so far: {memory}", f"Just finished: {step}"]
    assert turns("plan_update", LanguageContext(task=TASK, subtask=step, plan=plan)) == [
        TASK, f"Plan:\n{plan}", f"Just finished: {step}"]
    assert turns("interjection", LanguageContext(task=TASK, plan=plan), user_text="no, the left bin") == [
        TASK, f"Plan:\n{plan}", "no, the left bin"]
    assert turns("interjection", LanguageContext(task=TASK), user_text="") == [TASK, ""]
    assert turns("action", LanguageContext(subtask=step)) == [step]
    assert live.render("action", LanguageContext(subtask=step)).messages[0]["role"] == "user"


def test_questions_are_found_by_what_they_write_and_read_not_by_name() -> None:
    renamed = HIERARCHICAL
    for old, new in (("high_level_subtask", "next"), ("low_level_execution", "go"), ("progress:", "where:"),
                     ("memory_update", "notes"), ("plan_update", "replan"), ("interjection_response", "reply")):
        renamed = renamed.replace(old, new)
    live = LivePrompts(parse_recipe(renamed))
    assert {q: [a.name for a in found] for q, found in live.answerers.items()} == {
        "subtask": ["next"], "action": ["go"], "progress": ["where"], "plan": ["plan"], "plan_update": ["replan"],
        "memory": ["notes"], "interjection": ["reply"]}
    vlm = LivePrompts(load_recipe("subtask_mem_vqa_speech"))
    assert set(vlm.answerers) == {"progress", "action", "memory", "interjection", "vqa"}
    assert not LivePrompts(parse_recipe(BC)).has("plan") and LivePrompts(parse_recipe(BC)).has("action")
    # A low level that reads more than the command (the motion) is not the runtime's action question.
    assert [a.name for a in LivePrompts(load_recipe("motion")).answerers["action"]] == ["subtask_execution"]


def test_a_prompt_that_reads_its_own_answer_is_refused_in_one_line() -> None:
    leaky = """
blend:
  cheat:
    weight: 1.0
    messages:
      - {role: user, content: "${task} ${memory}", stream: high_level}
      - {role: user, content: "Just finished: ${subtask}", stream: high_level}
      - {role: assistant, content: "${memory}", stream: high_level, target: true, if_present: memory}
"""
    live = LivePrompts(parse_recipe(leaky), origin="leaky.yaml")
    with pytest.raises(ConfigError, match="reads in its prompt what its 'memory' answer writes") as info:
        live.render("memory", LanguageContext(task=TASK, subtask="pick up the red cube"))
    assert "\n" not in str(info.value)


class _Recorder:
    """Stands in for a PolicyRunner over `recipe`: records every prompt, answers from `replies`."""

    def __init__(self, recipe: str, replies: dict[str, str] | None = None) -> None:
        self.prompts = LivePrompts(parse_recipe(recipe), origin="recipe.yaml")
        self.cfg = PolicyConfig()
        self.replies = replies or {}
        self.asked: list[list[Any]] = []
        self.checked: list[str] = []
        self.took: dict[str, float | None] = {}

    def generate(self, chats: Any, observation: Any, generation: Any = None, canonical: bool = False
                 ) -> list[ParsedReply]:
        turns = [m["content"] for m in chats[0]]
        self.asked.append(turns)
        return [ParsedReply(next((a for k, a in self.replies.items() if k in turns[-1]), "?"))]

    def step_took(self, command: str, observation: Any) -> float | None:
        self.checked.append(command)
        return self.took.get(command)


def _update(high: PolicyHighLevel, kind: Any = "update", done: bool = False, user_text: str | None = None,
            **context: Any) -> Any:
    request = HighLevelRequest(kind, LanguageContext(task=TASK, **context), Observation(state=np.zeros(4, np.float32)),
                               user_text=user_text, controller_done=done)
    return high.update(request)


def test_a_question_the_recipe_does_not_train_is_not_asked(caplog: pytest.LogCaptureFixture) -> None:
    runner = _Recorder(PLAN_ONLY, {"Write the plan.": "1. pick up the red cube\n2. place it in the blue bin"})
    high = PolicyHighLevel(runner)
    first = _update(high)
    assert runner.asked == [[TASK, "Write the plan."]] and first.subtask == "pick up the red cube"
    runner.asked.clear()
    after = _update(high, done=True, subtask="pick up the red cube", plan=first.plan)
    assert runner.asked == [] and after.memory is None  # no memory component: no memory written
    assert after.subtask == "place it in the blue bin"
    with caplog.at_level("WARNING"):
        said = _update(high, "interjection", user_text="stop", plan=after.plan)
        answered = _update(high, "ask", user_text="where is the cube?")
    assert runner.asked == [] and said == answered == type(said)()  # nothing asked, nothing changed
    assert "'interjection' question" in caplog.text and "'vqa' question" in caplog.text
    # A plan in other words and no subtask question: a failed call (the loop holds), not a made-up prompt.
    with pytest.raises(ValueError, match="trains no subtask from the plan"):
        _update(high, plan="first the red cube")


def test_a_recipe_that_gives_no_way_to_the_next_step_is_refused_when_the_high_level_is_built() -> None:
    with pytest.raises(ConfigError, match="trains neither a plan nor a subtask") as info:
        PolicyHighLevel(_Recorder(BC))
    assert "\n" not in str(info.value)
    with pytest.raises(ConfigError, match="trains no `progress` question"):
        PolicyHighLevel(_Recorder(PLAN_ONLY), progress_from_observation=True)
    PolicyHighLevel(_Recorder(HIERARCHICAL), progress_from_observation=True)


def test_a_checkpoint_whose_recipe_cannot_act_or_is_broken_fails_at_load(oracle: Any, runner: PolicyRunner,
                                                                         tmp_path: Path) -> None:
    from steerable.runtime.policy_adapter import load_high_level, load_low_level

    model, processor = runner.model, runner.processor
    text_only = save_checkpoint(tmp_path / "a", 1, model, processor, TEXT_ONLY)
    with pytest.raises(ConfigError, match="cannot be the low level") as info:
        load_low_level(text_only)
    assert "\n" not in str(info.value)
    assert load_high_level(text_only).prompts.has("plan")
    broken = save_checkpoint(tmp_path / "b", 1, model, processor, "blend: {}\n")
    with pytest.raises(RecipeError, match="recipe.yaml"):
        PolicyRunner(load_policy(broken))


def test_the_lerobot_adapter_acts_on_the_task_when_the_recipe_writes_no_subtask(runner: PolicyRunner,
                                                                                tmp_path: Path) -> None:
    from steerable.policy.lerobot import SteerablePolicy

    where = save_checkpoint(tmp_path, 1, runner.model, runner.processor, BC)
    policy = SteerablePolicy.from_pretrained(where)
    cfg = policy.config
    batch: dict[str, Any] = {c: torch.rand(1, 3, 16, 16) for c in cfg.cameras}
    batch.update({"observation.state": torch.zeros(1, cfg.state_dim), "task": [TASK]})
    policy.predict_action_chunk(batch)
    assert policy.last_subtasks == [TASK]


PLAN = "1. fetch the widget\n2. mount the widget on the rail\n3. fetch the bolt\n4. mount the bolt on the widget"


def test_a_step_that_did_not_take_is_redone_with_the_step_it_was_planned_to_follow() -> None:
    """World-free: the words of the steps mean nothing to the high level (no pick, no place)."""
    runner = _Recorder(HIERARCHICAL, {"Just finished": "noted"})
    runner.took = {"mount the widget on the rail": 0.1}
    high = PolicyHighLevel(runner)
    fetched = _update(high, done=True, subtask="fetch the widget", plan=PLAN)
    assert runner.checked == ["fetch the widget"]  # a first step is checked too (this check cannot tell)
    again = _update(high, done=True, subtask="mount the widget on the rail", plan=fetched.plan, memory="noted")
    assert again.subtask == "fetch the widget" and again.memory is None  # the memory stays as it was
    assert again.plan == PLAN  # both steps back at the head of the plan, as they were asked


def test_a_step_the_check_confirmed_is_not_redone_for_a_later_one() -> None:
    runner = _Recorder(HIERARCHICAL, {"Just finished": "noted"})
    runner.took = {"mount the widget on the rail": 0.9, "mount the bolt on the widget": 0.2}
    high = PolicyHighLevel(runner)
    plan = "1. mount the widget on the rail\n2. mount the bolt on the widget\n3. fetch the bolt"
    _update(high, done=True, subtask="fetch the widget", plan="1. fetch the widget\n" + plan)
    mounted = _update(high, done=True, subtask="mount the widget on the rail", plan=plan)
    assert mounted.subtask == "mount the bolt on the widget"  # it took
    again = _update(high, done=True, subtask="mount the bolt on the widget", plan=mounted.plan)
    assert again.subtask == "mount the bolt on the widget"  # alone: the mount before it is confirmed
    assert again.plan == "1. mount the bolt on the widget\n2. fetch the bolt"


def test_the_vlm_planner_renders_through_the_same_questions_and_keeps_the_interrupted_plan() -> None:
    """One renderer: the VLM planner's reply prompt under a recipe whose reply reads the plan the user
    interrupted (`prior_plan`) now carries it (the planner's own renderer left it out)."""
    from steerable.runtime.prompts import RecipePrompts

    ctx = LanguageContext(task=TASK, subtask="pick up the red cube", plan="1. pick up the red cube\n2. place it")
    for recipe in ("hirobot", "hierarchical"):
        prompt = RecipePrompts.load(recipe).render("speech", ctx, user_text="no, the left bin")
        assert [m["content"] for m in prompt] == [TASK, f"Plan:\n{ctx.plan}", "no, the left bin"]
    assert RecipePrompts.load("hierarchical").render("subtask", ctx) == LivePrompts(
        load_recipe("hierarchical")).render("subtask", ctx).messages
