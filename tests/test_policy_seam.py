"""The seam between the runtime and a policy runner, typed (issue #38): the runtime reads the
checkpoint's `PolicyConfig` by attribute (a renamed field fails, never falls back to a default), and
the observation it hands the policy is one `PolicyObservation` on both sides."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path
from typing import Any, get_type_hints

import numpy as np
import pytest

from steerable.control import ENVIRONMENT_STATE_FEATURE, Observation
from steerable.errors import ConfigError
from steerable.policy.config import PolicyConfig
from steerable.policy.generation import ParsedReply
from steerable.policy.inference import PolicyObservation, PolicyRunner
from steerable.recipes import load_recipe
from steerable.recipes.live import LivePrompts
from steerable.runtime.policy_high_level import PolicyHighLevel
from steerable.runtime.policy_observation import ChecksSteps, TextPolicy, policy_observation, reads_cameras
from steerable.runtime.policy_server import served_features
from steerable.runtime.policy_wire import ServedFeatures

SRC = Path(__file__).resolve().parents[1] / "src" / "steerable"
# The modules on either side of the seam: what the runtime reads of a runner, and the runner itself.
SEAM = [SRC / "runtime" / "policy_adapter.py", SRC / "runtime" / "policy_observation.py",
        SRC / "runtime" / "policy_high_level.py", SRC / "policy" / "inference.py"]
# ... and the policy server, which reads the served checkpoint's config (and getattrs only its sockets).
CONFIG_READERS = [*SEAM, SRC / "runtime" / "policy_server.py"]
TESTS = Path(__file__).resolve().parent


def _config_reads(path: Path) -> set[str]:
    """The attributes read of a policy configuration in `path`: `<x>.cfg.NAME` and `cfg.NAME`."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Attribute):
            owner = node.value
            if (isinstance(owner, ast.Name) and owner.id == "cfg") or \
                    (isinstance(owner, ast.Attribute) and owner.attr == "cfg"):
                names.add(node.attr)
    return names


def test_the_runtime_reads_nothing_of_a_runner_by_getattr() -> None:
    """A `getattr(cfg, "name", default)` falls back silently when the field is renamed; what only some
    runners have is an optional protocol (`ChecksSteps`)."""
    found = [f"{path.name}:{node.lineno}" for path in SEAM
             for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
             if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr"]
    assert found == []


def test_every_config_field_the_runtime_reads_is_a_policy_config_field() -> None:
    fields = {f.name for f in dataclasses.fields(PolicyConfig)} | {
        name for name, value in vars(PolicyConfig).items() if isinstance(value, property)}
    read = set().union(*(_config_reads(path) for path in CONFIG_READERS))
    # What the runtime is known to read: if the scan stops finding these, it no longer checks anything.
    assert {"read_state_keys", "state_keys", "locate_key", "located", "cameras", "done_head", "pose_pairs",
            "motion_dim", "n_action_steps", "step_check"} <= read
    assert sorted(read - fields) == []


def test_a_runner_s_config_is_a_policy_config_on_both_sides() -> None:
    for side in (TextPolicy, PolicyRunner):
        assert get_type_hints(vars(side)["cfg"].fget)["return"] is PolicyConfig, side.__name__


def test_the_observation_is_one_typed_dict_on_both_sides() -> None:
    from steerable.policy.rtc import guided_chunk

    assert get_type_hints(policy_observation)["return"] is PolicyObservation
    assert get_type_hints(TextPolicy.generate)["observation"] is PolicyObservation
    for method in (PolicyRunner.inputs, PolicyRunner.generate, PolicyRunner.act, PolicyRunner.act_and_done,
                   PolicyRunner.step_took, PolicyRunner.robot_actions, PolicyRunner.model_actions, guided_chunk):
        assert get_type_hints(method)["observation"] is PolicyObservation, method.__qualname__
    assert PolicyObservation.__required_keys__ == {"state"}
    assert PolicyObservation.__optional_keys__ == {"images", "motion"}


class _Runner:
    """A `TextPolicy` without a model: its config is a real `PolicyConfig`."""

    def __init__(self, cfg: PolicyConfig) -> None:
        self.cfg = cfg
        self.prompts = LivePrompts(load_recipe("hierarchical"))
        self.seen: list[PolicyObservation] = []

    def generate(self, chats: Any, observation: PolicyObservation, generation: Any = None,
                 canonical: bool = False) -> list[ParsedReply]:
        self.seen.append(observation)
        return [ParsedReply("1. pick up the cube")]


def test_the_state_is_built_from_the_config_s_state_keys() -> None:
    robot, objects = np.arange(4, dtype=np.float32), np.full(3, 9.0, np.float32)
    frame = np.zeros((8, 8, 3), np.uint8)
    obs = Observation(state=robot, images={"top": frame}, environment_state=objects)
    plain = policy_observation(obs, _Runner(PolicyConfig()))
    assert np.array_equal(plain["state"], robot) and set(plain.get("images") or {}) == {"top"}
    both = PolicyConfig(state_key=f"observation.state,{ENVIRONMENT_STATE_FEATURE}")
    assert np.array_equal(policy_observation(obs, _Runner(both))["state"], np.concatenate([robot, objects]))
    located = PolicyConfig(state_key="observation.state,observation.located", locate_key="observation.located",
                           located=2)
    assert np.array_equal(policy_observation(obs, _Runner(located))["state"], [0, 1, 2, 3, 0, 0])
    with pytest.raises(ConfigError, match="--observation privileged"):
        policy_observation(Observation(state=robot), _Runner(both))


def test_the_step_check_is_asked_of_a_runner_that_has_one() -> None:
    assert issubclass(PolicyRunner, ChecksSteps)
    assert not isinstance(_Runner(PolicyConfig()), ChecksSteps)  # a high level over it asks no check


def test_a_runner_reads_cameras_when_its_config_names_some() -> None:
    assert not reads_cameras(_Runner(PolicyConfig()))
    assert reads_cameras(_Runner(PolicyConfig(cameras=["observation.images.top"])))
    assert PolicyHighLevel(_Runner(PolicyConfig(cameras=["observation.images.top"]))).wants_images


def test_no_stand_in_for_a_runner_needs_a_type_ignore() -> None:
    """A runner's stand-in is a `TextPolicy` (or a `PolicyRunner` subclass): no monkeypatched method,
    no assignment over a runner that needs the type check silenced."""
    handed = ("PolicyHighLevel(", "PolicyLowLevel(", ".runner =", "runner.act", "runner.generate", "runner.model.",
              "guided_chunk(")
    flagged = [f"{path.name}:{number}" for path in sorted(TESTS.glob("test_*.py"))
               for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
               if "type: ignore" in line and any(call in line for call in handed)]
    assert flagged == []


def test_a_policy_server_reads_what_a_request_must_hold_from_the_checkpoint_config() -> None:
    """`steerable serve-policy` tells clients the state size, cameras and action size from the served
    runner's `PolicyConfig`; a controller without one (a LeRobot policy) leaves them unknown."""

    class Served:
        def __init__(self, cfg: PolicyConfig) -> None:
            self.runner = _Runner(cfg)

    cfg = PolicyConfig(state_key=f"observation.state,{ENVIRONMENT_STATE_FEATURE}", state_dim=9, action_dim=4,
                       cameras=["observation.images.top"])
    assert served_features(Served(cfg)) == ServedFeatures(state_size=9, environment_state=True,
                                                          cameras=("observation.images.top",), action_dim=4)
    assert served_features(object()) == ServedFeatures()
