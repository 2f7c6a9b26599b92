"""Build the high-level model and low-level controller a run asks for, by name.

`scripted` (the environment's own test doubles, its `scripted_planner()` / `scripted_controller()`:
the simulator's read its true state), `vlm` (any OpenAI-compatible server), `policy` (a
trained hierarchical policy checkpoint, through `steerable.runtime.policy_adapter`, imported lazily),
`lerobot` for the low level (a LeRobot policy, through `steerable.runtime.lerobot.policy`, imported
lazily: it executes the active subtask as its `task`), and `none` for the high level (direct-task:
the controller executes the task or the operator's words).
A `StackSpec` is plain data so evaluation workers can rebuild the same stack in their process.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from steerable.control import Environment, HighLevelModel, LowLevelController
from steerable.errors import ConfigError

__all__ = ["HIGH_LEVELS", "LOW_LEVELS", "OBSERVATIONS", "StackSpec", "build_high", "build_low", "check_scripted"]

HighKind = Literal["scripted", "vlm", "policy", "none"]
LowKind = Literal["scripted", "policy", "lerobot"]
HIGH_LEVELS: tuple[str, ...] = ("scripted", "vlm", "policy", "none")
LOW_LEVELS: tuple[str, ...] = ("scripted", "policy", "lerobot")
OBSERVATIONS: tuple[str, ...] = ("standard", "privileged")


@dataclass(frozen=True)
class StackSpec:
    """Which models to run; `vlm` holds VLMConfig fields, `lerobot` the options of a LeRobot low level
    (`policy_path`, `device`, `dataset`), `recipe` names the high-level prompt recipe."""

    high_level: str = "scripted"
    low_level: str = "scripted"
    policy_path: str | None = None
    device: str = "cpu"
    vlm: dict[str, Any] = field(default_factory=dict)
    lerobot: dict[str, Any] = field(default_factory=dict)
    recipe: str | None = None
    fps: int = 15
    # "privileged": a policy may read the simulator's object positions (its environment state).
    observation: str = "standard"
    policy_server: str | None = None  # HOST:PORT of `steerable serve-policy`: the low level runs there
    policy_token: str | None = field(default=None, repr=False)  # its token (None: STEERABLE_POLICY_TOKEN)
    step_check: bool = True  # a learned high level does again a step its policy's check says did not take
    flow_noise: float | None = None  # a learned low level's noise scale, instead of its checkpoint's

    def __post_init__(self) -> None:
        if self.observation not in OBSERVATIONS:
            raise ConfigError(f"--observation {self.observation!r}: choose one of {', '.join(OBSERVATIONS)}")
        if self.high_level not in HIGH_LEVELS:
            raise ConfigError(f"--high_level {self.high_level!r}: choose one of {', '.join(HIGH_LEVELS)}")
        if self.low_level not in LOW_LEVELS:
            raise ConfigError(f"--low_level {self.low_level!r}: choose one of {', '.join(LOW_LEVELS)}")
        served = self.low_level == "policy" and self.policy_server is not None
        if (self.high_level == "policy" or (self.low_level == "policy" and not served)) and not self.policy_path:
            raise ConfigError("--high_level/--low_level policy needs --policy.path CHECKPOINT (or, for the low "
                              "level, --policy.server HOST:PORT)")
        if self.low_level == "lerobot" and not self.lerobot.get("policy_path"):
            raise ConfigError("--low_level lerobot needs --lerobot.policy_path DIR (a folder LeRobot's save_pretrained "
                              "wrote, or a Hub id)")


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
    # The scripted controller reports each command done, and so does the policy's own low level when
    # it learned when a command is complete (its done head); over any other low level the policy
    # reads progress from the observation.
    adapter = _policy_runtime()
    reports_done = spec.low_level == "scripted" or (
        spec.low_level == "policy" and adapter.low_level_reports_done(spec.policy_path, spec.device))
    model: HighLevelModel = adapter.load_high_level(
        spec.policy_path, spec.device, spec.observation, progress_from_observation=not reports_done,
        step_check=spec.step_check)
    return model


def build_low(spec: StackSpec, env: Environment) -> LowLevelController:
    if spec.low_level == "scripted":
        scripted: LowLevelController = _scripted(env, "--low_level", "controller")()
        return scripted
    if spec.low_level == "lerobot":
        from steerable.runtime.lerobot.policy import load_lerobot_policy

        lerobot: LowLevelController = load_lerobot_policy(env=env, observation=spec.observation, **spec.lerobot)
        return lerobot
    if spec.policy_server is not None:
        from steerable.runtime.remote_policy import connect_policy

        remote: LowLevelController = connect_policy(spec.policy_server, spec.observation,
                                                        token=spec.policy_token)
        return remote
    controller: LowLevelController = _policy_runtime().load_low_level(
        spec.policy_path, spec.device, spec.observation, flow_noise=spec.flow_noise)
    return controller
