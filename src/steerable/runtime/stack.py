"""Build the high-level model and low-level controller a run asks for, by name.

`scripted` (the environment's own test doubles, its `scripted_planner()` / `scripted_controller()`:
the simulator's read its true state), `vlm` (any OpenAI-compatible server), `policy` (a
trained hierarchical policy checkpoint, through `steerable.runtime.policy_adapter`, imported lazily), and
`none` for the high level (direct-task: the controller executes the task or the operator's words).
A `StackSpec` is plain data so evaluation workers can rebuild the same stack in their process.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from steerable.control import Environment, HighLevelModel, LowLevelController
from steerable.errors import ConfigError

__all__ = ["HIGH_LEVELS", "LOW_LEVELS", "OBSERVATIONS", "StackSpec", "build_high", "build_low", "check_scripted"]

HighKind = Literal["scripted", "vlm", "policy", "none"]
LowKind = Literal["scripted", "policy"]
HIGH_LEVELS: tuple[str, ...] = ("scripted", "vlm", "policy", "none")
LOW_LEVELS: tuple[str, ...] = ("scripted", "policy")
OBSERVATIONS: tuple[str, ...] = ("standard", "privileged")


@dataclass(frozen=True)
class StackSpec:
    """Which models to run; `vlm` holds VLMConfig fields, `recipe` names the high-level prompt recipe."""

    high_level: str = "scripted"
    low_level: str = "scripted"
    policy_path: str | None = None
    device: str = "cpu"
    vlm: dict[str, Any] = field(default_factory=dict)
    recipe: str | None = None
    fps: int = 15
    # "privileged": a policy may read the simulator's object positions (its environment state).
    observation: str = "standard"

    def __post_init__(self) -> None:
        if self.observation not in OBSERVATIONS:
            raise ConfigError(f"--observation {self.observation!r}: choose one of {', '.join(OBSERVATIONS)}")
        if self.high_level not in HIGH_LEVELS:
            raise ConfigError(f"--high_level {self.high_level!r}: choose one of {', '.join(HIGH_LEVELS)}")
        if self.low_level not in LOW_LEVELS:
            raise ConfigError(f"--low_level {self.low_level!r}: choose one of {', '.join(LOW_LEVELS)}")
        if "policy" in (self.high_level, self.low_level) and not self.policy_path:
            raise ConfigError("--high_level/--low_level policy needs --policy.path CHECKPOINT")


def _policy_runtime() -> Any:
    try:
        from steerable.runtime import policy_adapter
    except ImportError as exc:
        raise ConfigError(
            "the trained-policy adapters (steerable.runtime.policy_adapter) are not available in this install "
            f"({exc}); use --high_level scripted|vlm and --low_level scripted, or install steerable[policy]"
        ) from exc
    return policy_adapter


def _scripted(env: Environment, flag: str, role: str) -> Any:
    make = getattr(env, f"scripted_{role}", None)
    if not callable(make):
        raise ConfigError(f"{flag} scripted: this environment ({type(env).__name__}) has no scripted {role} "
                          f"(a test double); choose another {flag}")
    return make


def check_scripted(spec: StackSpec, env: Environment) -> None:
    """Raise ConfigError now when `spec` asks for a scripted model `env` does not have."""
    if spec.high_level == "scripted":
        _scripted(env, "--high_level", "planner")
    if spec.low_level == "scripted":
        _scripted(env, "--low_level", "controller")


def build_high(spec: StackSpec, env: Environment) -> HighLevelModel | None:
    if spec.high_level == "none":
        return None
    if spec.high_level == "scripted":
        planner: HighLevelModel = _scripted(env, "--high_level", "planner")()
        return planner
    if spec.high_level == "vlm":
        from steerable.runtime.vlm_planner import VLMPlanner

        return VLMPlanner.from_config(spec.vlm, recipe=spec.recipe)
    # The scripted controller reports each command done; a learned low level does not, so the
    # policy then reads progress from the observation.
    model: HighLevelModel = _policy_runtime().load_high_level(
        spec.policy_path, spec.device, spec.observation, progress_from_observation=spec.low_level != "scripted")
    return model


def build_low(spec: StackSpec, env: Environment) -> LowLevelController:
    if spec.low_level == "scripted":
        scripted: LowLevelController = _scripted(env, "--low_level", "controller")()
        return scripted
    controller: LowLevelController = _policy_runtime().load_low_level(
        spec.policy_path, spec.device, spec.observation)
    return controller
