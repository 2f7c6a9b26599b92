"""The step check (`--policy.step_check`, docs/policy.md "Checking a step"): a second output of the
done head says whether a command reported done took, learnt from the done frames and copies of them
with the moved object put beside its target; the learned high level does a step again when it did not."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from policy_helpers import (  # noqa: F401  (one_thread: an autouse fixture)
    TINY,
    batch_of,
    easy_privileged_dataset,
    one_thread,
    steerable_cli,
)
from steerable.control import HighLevelRequest, LanguageContext, Observation
from steerable.dataset import open_dataset
from steerable.errors import ConfigError
from steerable.policy.checkpoint import load_policy, save_checkpoint
from steerable.policy.config import UNSAVED_BEFORE, PolicyConfig
from steerable.policy.counterexamples import CHECK_STRIDE, moved_away
from steerable.policy.data import PolicyDataset
from steerable.policy.generation import ParsedReply
from steerable.policy.inference import PolicyRunner
from steerable.policy.objects import command_objects, object_layout, resolve_objects
from steerable.policy.setup import build_fresh
from steerable.recipes import load_recipe
from steerable.recipes.live import LivePrompts
from steerable.runtime.policy_high_level import MAX_REDO, PolicyHighLevel
from steerable.synthetic.generate import synthetic_features
from steerable.synthetic.object_schema import simulator_objects
from steerable.synthetic.privileged import ENVIRONMENT_STATE_NAMES

NAMES = ["ee.x", "ee.y", "ee.z", "gripper.closure", *ENVIRONMENT_STATE_NAMES]
KEYS = ["observation.state", "observation.environment_state"]
# The simulator's objects over that state (what `steerable train` reads from its meta/objects.json).
LAYOUT = resolve_objects(simulator_objects(True), KEYS, synthetic_features(["wrist"], True))
assert LAYOUT is not None and LAYOUT.end_effector is not None


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return easy_privileged_dataset(tmp_path_factory, "check")


@pytest.fixture(scope="module")
def built(dataset: Path) -> Any:
    torch.manual_seed(0)
    return build_fresh(open_dataset(dataset), {**TINY, "cameras": ["none"], "step_check": True}, eval_fraction=0.0,
                       seed=0)


def test_a_command_names_the_object_it_moves_then_its_target() -> None:
    moved, target = command_objects("place the red cube in the blue bin", LAYOUT) or (None, None)
    assert moved is not None and target is not None
    assert (moved.name, target.name) == ("red cube", "blue bin") and target.axes[2] is None
    moved, target = command_objects("put the green cube on the red cube", LAYOUT) or (None, None)
    assert moved is not None and target is not None and (moved.name, target.name) == ("green cube", "red cube")
    assert command_objects("pick up the red cube", LAYOUT) is None
    # A word of a name is not the name: "left" is a direction here, not the left zone.
    assert command_objects("push the red cube left", LAYOUT) is None


@pytest.mark.parametrize("command, near", [("place the red cube in the blue bin", 0.05),
                                           ("place the red cube on the green cube", 0.025)])
def test_a_counter_example_puts_the_object_beside_its_target_and_changes_nothing_else(command: str, near: float
                                                                                     ) -> None:
    cfg = PolicyConfig(state_key="observation.state,observation.environment_state", state_dim=len(NAMES),
                       state_names=NAMES, step_check=True, objects=LAYOUT.to_dict())
    moved, target = command_objects(command, LAYOUT) or (None, None)
    assert moved is not None and target is not None
    state = torch.rand(len(NAMES)) * 0.3 + 0.1
    tx, ty = float(state[target.axes[0]]), float(state[target.axes[1]])
    seen = []
    for seed in range(200):
        out = moved_away(state, command, cfg, LAYOUT, np.random.default_rng(seed))
        x, y, z = (out[k] if k is not None else None for k in moved.axes)
        assert z is not None and float(z) == 0.0
        reach = max(abs(float(x) - tx), abs(float(y) - ty))
        assert near - 1e-6 <= reach <= near + 0.06 + 1e-6
        seen.append(reach)
        # The gripper moved with the object (it let go over the spot it missed), nothing else changed.
        ee = LAYOUT.end_effector
        assert ee is not None
        for a, k in zip(ee[:2], moved.axes[:2], strict=True):
            assert k is not None
            assert float(out[a] - state[a]) == pytest.approx(float(out[k] - state[k]), abs=1e-6)
        untouched = [k for k in range(len(NAMES)) if k not in (*moved.axes, *ee[:2])]
        assert torch.equal(out[untouched], state[untouched])
    assert min(seen) < near + 0.01 and max(seen) > near + 0.05  # the whole band, near edges included


def test_the_done_items_of_a_placement_teach_the_check_both_ways(dataset: Path, built: Any) -> None:
    data = PolicyDataset(open_dataset(dataset), load_recipe("hierarchical"), built.model.cfg,
                         built.processor.image_size, component="low_level_execution")
    places = [(p, c) for p, c in data.done_items if command_objects(c, LAYOUT)]
    # The placements of done_items, then each episode's last placement on its final stillness, one
    # frame in CHECK_STRIDE.
    assert places and len(places) < len(data.done_items)
    kept = len(places[::CHECK_STRIDE])
    assert data.check_items[:kept] == places[::CHECK_STRIDE]
    finals = data.check_items[kept:]
    assert finals and all(command_objects(c, LAYOUT) for _, c in finals)
    assert {p for p, _ in finals} <= set(data.positions)
    first_done = len(data.positions) + len(data.extra)
    took = [data[first_done + k] for k, (_, c) in enumerate(data.done_items) if command_objects(c, LAYOUT)][0]
    pick = [data[first_done + k] for k, (_, c) in enumerate(data.done_items) if not command_objects(c, LAYOUT)][0]
    undone = data[first_done + len(data.done_items)]
    assert took is not None and pick is not None and undone is not None
    assert (float(took["done"]), float(took["check"])) == (1.0, 1.0)
    assert (float(pick["done"]), float(pick["check"])) == (1.0, -1.0)  # a pick is not checked
    assert (float(undone["done"]), float(undone["check"])) == (-1.0, 0.0)  # the done head learns nothing here
    assert not undone["action_mask"].any() and undone["messages"][0]["content"] == places[0][1]
    assert not torch.equal(undone["state"], took["state"]) or places[0][0] != data.done_items[0][0]
    # Frames where a command is not done do not train the check; the final stillness does.
    assert float(data[0]["check"]) == -1.0
    final = data[data.positions.index(finals[0][0])]
    assert final is not None and (float(final["done"]), float(final["check"])) == (1.0, 1.0)
    # The check reads where the moved object stands from its target (tenths of a metre).
    moved, target = command_objects(places[0][1], LAYOUT) or (None, None)
    assert moved is not None and target is not None
    for item in (took, undone):
        assert item["relation"][:2].tolist() == pytest.approx(
            [float(item["state"][moved.axes[k]] - item["state"][target.axes[k]]) / 0.1 for k in (0, 1)], abs=1e-5)
    assert float(undone["relation"][:2].abs().max()) >= 0.5 - 1e-5 > float(took["relation"][:2].abs().max())
    batch = built.processor.training_batch(batch_of(data, [0, first_done, len(data) - 1]))
    out = built.model(batch)
    assert float(out["check_loss"]) > 0
    out["loss"].backward()
    assert built.model.check_out is not None
    assert built.model.check_out[0].weight.grad is not None and built.model.check_out[0].weight.grad.abs().sum() > 0
    built.model.zero_grad()
    # The check learns on top of what the done head pools: its loss alone changes nothing below it.
    enc = built.model.encode(batch.get("images"), batch.get("state"), batch["input_ids"], batch["attention_mask"])
    ctx, valid = built.model.contexts(enc)
    check = built.model.done_head_logits(ctx, valid, batch["relation"])[1]
    assert check is not None
    check.sum().backward()
    assert built.model.done_query.grad is None or not built.model.done_query.grad.abs().sum()
    assert all(p.grad is None or not p.grad.abs().sum() for p in built.model.backbone.parameters())
    built.model.zero_grad()


def pin_check(model: Any, sharpness: float = 20.0, confidence: float = 6.0) -> None:
    """Make `model`'s step check a known one: the logit `confidence - sharpness * (|x| + |y|)` of the
    command's relation (x, y: the moved object's offset from its target, in relation lengths), whatever
    else it reads. GELU(a) + GELU(-a) is |a| to within 0.17 (at a = 0, 0), so a step done is taken
    as done (p > 0.99) and one a relation length off is not (p < 1e-6)."""
    check = model.check_out
    first, second, last = check[0], check[2], check[4]
    x = first.in_features - 4  # the relation's columns come after the context
    with torch.no_grad():
        for layer in (first, second, last):
            layer.weight.zero_()
            layer.bias.zero_()
        for row, (column, sign) in enumerate([(x, 1.0), (x, -1.0), (x + 1, 1.0), (x + 1, -1.0)]):
            first.weight[row, column] = sign * sharpness
            second.weight[0, row] = 1.0
        last.weight[0, 0] = -1.0
        last.bias.fill_(confidence)


def test_the_runner_checks_placements_only_and_a_checkpoint_before_has_no_check(built: Any, tmp_path: Path
                                                                              ) -> None:
    recipe_text = Path(load_recipe("hierarchical").origin).read_text(encoding="utf-8")
    where = save_checkpoint(tmp_path, 1, built.model, built.processor, recipe_text)
    runner = PolicyRunner(load_policy(where))
    command = "place the red cube in the blue bin"
    moved, target = command_objects(command, object_layout(runner.cfg)) or (None, None)
    assert moved is not None and target is not None
    state = np.zeros(runner.cfg.state_dim, np.float32)
    state[[target.axes[0], target.axes[1]]] = (0.25, -0.1)
    state[[moved.axes[0], moved.axes[1]]] = (0.25, -0.1)  # the red cube on the bin: it took
    pin_check(runner.model)
    assert runner.step_took(command, {"state": state, "images": {}}) == pytest.approx(1.0, abs=0.01)
    state[moved.axes[0]] = 0.55  # 30 cm off the bin: it did not
    assert runner.step_took(command, {"state": state, "images": {}}) == pytest.approx(0.0, abs=0.01)
    assert runner.step_took("pick up the red cube", {"state": state, "images": {}}) is None
    assert UNSAVED_BEFORE["step_check"] is False  # a checkpoint that does not name it has no check output
    with pytest.raises(ConfigError, match="step_check needs"):
        PolicyConfig(done_head=False, step_check=True)
    # With a locator the positions it learns from are estimated: no check.
    assert not PolicyConfig(state_key="observation.state,observation.environment_state", step_check=True,
                            locate_key="observation.environment_state").step_check
    with pytest.raises(ConfigError, match="check_clearance"):
        PolicyConfig(check_clearance=-0.01)


class _Checked:
    """Stands in for a PolicyRunner with a step check: `took` is what the check answers."""

    def __init__(self, took: float | None) -> None:
        self.took = took
        self.checked: list[str] = []
        self.cfg = PolicyConfig()
        self.prompts = LivePrompts(load_recipe("hierarchical"))

    def generate(self, chats: Any, observation: Any, generation: Any = None, canonical: bool = False
                 ) -> list[ParsedReply]:
        return [ParsedReply("The red cube is in the blue bin.")]

    def step_took(self, command: str, observation: Any) -> float | None:
        self.checked.append(command)
        return None if command.startswith("pick") else self.took


TASK = "put the red cube in the blue bin, then the green cube in the left zone"
PLAN = ("1. pick up the red cube\n2. place the red cube in the blue bin\n3. pick up the green cube\n"
        "4. place the green cube in the left zone")


def _done(high: PolicyHighLevel, subtask: str, plan: str, memory: str | None = None) -> Any:
    ctx = LanguageContext(task=TASK, subtask=subtask, plan=plan, memory=memory)
    return high.update(HighLevelRequest("update", ctx, Observation(state=np.zeros(4, np.float32)),
                                        controller_done=True))


def test_a_placement_that_did_not_take_is_done_again_from_its_pick() -> None:
    runner = _Checked(took=0.1)
    high = PolicyHighLevel(runner)
    picked = _done(high, "pick up the red cube", PLAN)
    # The first step is checked too (this check cannot tell for a pick: it goes on).
    assert picked.subtask == "place the red cube in the blue bin" and runner.checked == ["pick up the red cube"]
    after = picked.plan
    again = _done(high, "place the red cube in the blue bin", after)
    assert again.subtask == "pick up the red cube" and again.memory is None  # the memory stays as it was
    assert again.plan == PLAN  # the pick and the place put back before what remains
    # Bounded: after MAX_REDO redos of the placement the plan goes on whatever the check says.
    for _ in range(MAX_REDO - 1):
        _done(high, "pick up the red cube", again.plan)
        again = _done(high, "place the red cube in the blue bin", after)
        assert again.subtask == "pick up the red cube"
    _done(high, "pick up the red cube", again.plan)
    on = _done(high, "place the red cube in the blue bin", after)
    assert on.subtask == "pick up the green cube" and on.memory


def test_a_placement_that_took_goes_on_and_the_last_one_ends_the_task_only_when_it_took() -> None:
    runner = _Checked(took=0.9)
    high = PolicyHighLevel(runner)
    _done(high, "pick up the green cube", "1. pick up the green cube\n2. place the green cube in the left zone")
    assert _done(high, "place the green cube in the left zone", "1. place the green cube in the left zone").task_done
    runner.took = 0.2
    high.reset()
    _done(high, "pick up the green cube", "1. pick up the green cube\n2. place the green cube in the left zone")
    last = _done(high, "place the green cube in the left zone", "1. place the green cube in the left zone")
    assert not last.task_done and last.subtask == "pick up the green cube"
    assert last.plan == "1. pick up the green cube\n2. place the green cube in the left zone"
    # A policy without a check (None) never redoes.
    runner.took = None
    high.reset()
    _done(high, "pick up the green cube", "1. pick up the green cube\n2. place the green cube in the left zone")
    assert _done(high, "place the green cube in the left zone", "1. place the green cube in the left zone").task_done


def test_run_can_turn_the_check_off_and_the_stack_carries_it() -> None:
    from steerable.runtime.settings import RunSettings

    on = RunSettings(high_level="policy", low_level="policy", policy={"path": "ckpt"})
    off = RunSettings(high_level="policy", low_level="policy", policy={"path": "ckpt", "step_check": False})
    assert on.stack().step_check is True and off.stack().step_check is False
    runner = _Checked(took=0.1)
    high = PolicyHighLevel(runner, step_check=False)
    _done(high, "pick up the green cube", "1. pick up the green cube\n2. place the green cube in the left zone")
    assert _done(high, "place the green cube in the left zone", "1. place the green cube in the left zone").task_done
    assert runner.checked == []
