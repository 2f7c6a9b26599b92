"""What the runtime needs from a trained policy, and the observation it gives one.

`TextPolicy` is what the runtime's high level (`steerable.runtime.policy_high_level`) calls on a
policy runner: `steerable.policy.inference.PolicyRunner` implements it, and so does a test's stand-in
that scripts the replies, without a model. Its `cfg` is the checkpoint's `PolicyConfig`, read by
attribute (a stand-in gives a `PolicyConfig` too), so a renamed field fails the type check, never
falls back to a default. `policy_observation` builds the policy's observation (a
`steerable.policy.inference.PolicyObservation`) from a runtime `Observation`, which both levels read:
a state vector from the checkpoint's state keys (`observation.state` from the robot state;
`observation.environment_state`, the objects' true positions, from an environment that provides them:
the simulator, with `--observation privileged`), and the cameras.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from steerable.control import ENVIRONMENT_STATE_FEATURE, Observation
from steerable.errors import ConfigError
from steerable.policy.config import PolicyConfig
from steerable.policy.generation import GenerationConfig, ParsedReply
from steerable.policy.inference import Chat, PolicyObservation
from steerable.recipes.live import LivePrompts

__all__ = [
    "STATE_SOURCES", "ChecksSteps", "RunsPolicy", "TextPolicy", "no_environment_state", "policy_observation",
    "reads_cameras",
]

# The state features the runtime can give a policy (see `policy_observation`).
STATE_SOURCES = ("observation.state", ENVIRONMENT_STATE_FEATURE)


class TextPolicy(Protocol):
    """A policy the high level asks for text: its configuration (the state keys and cameras it reads),
    its recipe's prompts, and replies to rendered chats."""

    @property
    def cfg(self) -> PolicyConfig: ...

    @property
    def prompts(self) -> LivePrompts: ...

    def generate(self, chats: Sequence[Chat], observation: PolicyObservation,
                 generation: GenerationConfig | None = None, *, canonical: bool = False) -> list[ParsedReply]:
        """One reply per chat, all reading `observation`."""
        ...


@runtime_checkable
class ChecksSteps(Protocol):
    """A policy that can tell whether a step reported done took (`PolicyRunner.step_took`): what the
    high level asks when it has one, as the loop asks an environment for what only some provide."""

    def step_took(self, command: str, observation: PolicyObservation) -> float | None:
        """The probability that `command`, reported done, took; None when the policy cannot tell."""
        ...


@runtime_checkable
class RunsPolicy(Protocol):
    """A controller driving one of steerable's own policies: what a policy server reads to say what a
    request must hold (a LeRobot policy's controller has no runner and is not one)."""

    @property
    def runner(self) -> TextPolicy: ...


def no_environment_state() -> ConfigError:
    """The refusal of a policy that reads the objects' true positions in a run that does not give them: when it is
    loaded (`--observation standard`) and, in case, at an observation without them."""
    return ConfigError(f"this policy reads {ENVIRONMENT_STATE_FEATURE} (object positions), which only the simulator "
                       "gives: run it with --env sim --observation privileged")


def policy_observation(obs: Observation | None, runner: TextPolicy) -> PolicyObservation:
    """The policy's observation: cameras, and its state vector built from the runner's
    `cfg.state_keys` in order (`observation.state` from `obs.state`, the environment state from
    `obs.environment_state`, zeros for the feature its cameras stand in for: `locate_key`)."""
    if obs is None:
        raise ValueError("the policy needs an observation (camera frames and state)")
    state = np.asarray(obs.state, dtype=np.float32)
    cfg = runner.cfg
    if cfg.state_keys != [STATE_SOURCES[0]]:
        parts = []
        for key in cfg.state_keys:
            if key == cfg.locate_key.strip():
                # Estimated by the policy from its cameras (steerable.policy.locate): a placeholder.
                parts.append(np.zeros(cfg.located, dtype=np.float32))
            elif key == ENVIRONMENT_STATE_FEATURE:
                if obs.environment_state is None:
                    raise no_environment_state()
                parts.append(np.asarray(obs.environment_state, dtype=np.float32).reshape(-1))
            else:
                parts.append(state.reshape(-1))
        state = np.concatenate(parts).astype(np.float32)
    return {"state": state, "images": dict(obs.images)}


def reads_cameras(runner: TextPolicy) -> bool:
    """Whether the policy reads camera frames (else the environment need not render them)."""
    return bool(runner.cfg.cameras)
