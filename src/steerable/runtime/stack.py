"""Build the high-level model and low-level controller a run asks for, by name.

`scripted` (the environment's own test doubles: `control.ScriptsPlanner` / `control.ScriptsController`,
the simulator's read its true state), `vlm` (any OpenAI-compatible server), `policy` (a
trained hierarchical policy checkpoint, through `steerable.runtime.policy_adapter`, imported lazily),
`lerobot` for the low level (a LeRobot policy, through `steerable.runtime.lerobot.policy`, imported
lazily: it executes the active subtask as its `task`), and `none` for the high level (direct-task:
the controller executes the task or the operator's words). `HighKind` / `LowKind` / `ObservationKind`
(the control contract's, re-exported) are the names each accepts, once.
A `StackSpec` is plain data so evaluation workers can rebuild the same stack in their process.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, get_args

from steerable.control import (
    Environment,
    HighLevelModel,
    LowLevelController,
    ObservationKind,
    ScriptsController,
    ScriptsPlanner,
)
from steerable.errors import ConfigError
from steerable.settings import check_choice
from steerable.vlm.backends import get_backend, resolve_backend
from steerable.vlm.config import VLMConfig

__all__ = [
    "HIGH_LEVELS", "LOW_LEVELS", "OBSERVATIONS", "HighKind", "LeRobotOptions", "LowKind", "ObservationKind",
    "StackSpec", "build_high", "build_low", "check_choice", "check_scripted",
]

# What `--high_level`, `--low_level` and `--observation` accept: the settings' types, their checks
# and their help all read these.
HighKind = Literal["scripted", "vlm", "policy", "none"]
LowKind = Literal["scripted", "policy", "lerobot"]
HIGH_LEVELS: tuple[HighKind, ...] = get_args(HighKind)
LOW_LEVELS: tuple[LowKind, ...] = get_args(LowKind)
OBSERVATIONS: tuple[ObservationKind, ...] = get_args(ObservationKind)


@dataclass(frozen=True)
class LeRobotOptions:
    """The LeRobot policy behind `--low_level lerobot` (`--lerobot.*`: see `RunLeRobotSettings`)."""

    policy_path: str | None = None
    device: str = "cpu"
    dataset: str | None = None


@dataclass(frozen=True)
class StackSpec:
    """Which models to run; `vlm` is the server behind `--high_level vlm` (`--vlm.*`, the VLMConfig
    `annotate` reads too), `lerobot` the LeRobot low level's options, `recipe` names the high-level
    prompt recipe."""

    high_level: HighKind = "scripted"
    low_level: LowKind = "scripted"
    policy_path: str | None = None
    device: str = "cpu"
    vlm: VLMConfig | None = None
    lerobot: LeRobotOptions = field(default_factory=LeRobotOptions)
    recipe: str | None = None
    fps: int = 15
    observation: ObservationKind = "standard"
    policy_server: str | None = None  # HOST:PORT of `steerable serve-policy`: the low level runs there
    policy_token: str | None = field(default=None, repr=False)  # its token (None: STEERABLE_POLICY_TOKEN)
    step_check: bool = True  # a learned high level does again a step its policy's check says did not take
    flow_noise: float | None = None  # a learned low level's noise scale, instead of its checkpoint's

    def __post_init__(self) -> None:
        # Plain data built in code too (tests, evaluation workers): the names are checked here as well.
        check_choice("--observation", self.observation, OBSERVATIONS)
        check_choice("--high_level", self.high_level, HIGH_LEVELS)
        check_choice("--low_level", self.low_level, LOW_LEVELS)
        _check_policy_path(self)
        if self.high_level == "vlm":
            _check_vlm(self.vlm)
        if self.low_level == "lerobot" and not self.lerobot.policy_path:
            raise ConfigError("--low_level lerobot needs --lerobot.policy_path DIR (a folder LeRobot's save_pretrained "
                              "wrote, or a Hub id)")


def _check_policy_path(spec: StackSpec) -> None:
    """A trained policy runs from --policy.path; only the low level may run on a policy server instead."""
    if spec.policy_path:
        return
    served = spec.low_level == "policy" and spec.policy_server is not None
    if spec.high_level == "policy":
        raise ConfigError("--high_level policy needs --policy.path CHECKPOINT" + (
            " too: it runs on this machine (the policy server serves only the low level)" if served else ""))
    if spec.low_level == "policy" and not served:
        raise ConfigError("--low_level policy needs --policy.path CHECKPOINT (or --policy.server HOST:PORT)")


def _check_vlm(config: VLMConfig | None) -> None:
    """`--high_level vlm` needs a backend, and the registry decides which (`vlm.backends.resolve_backend`): a URL,
    or one named with `--vlm.backend`. What that backend needs beyond (a model id, a URL) `make_vlm` checks."""
    name = resolve_backend(config) if config is not None else None
    if name is None:
        raise ConfigError("--high_level vlm needs --vlm.base_url (an OpenAI-compatible server) and --vlm.model_id, "
                          "or a backend run here: --vlm.backend transformers --vlm.model_id ID")
    if get_backend(name).serve is not None:  # servers `annotate` starts (vLLM replicas); a session only calls one
        raise ConfigError(f"--high_level vlm calls a model that runs: --vlm.backend {name} starts servers, which "
                          "`run` does not; serve the model and pass --vlm.base_url")


def _require_policy_runtime() -> None:
    """Raise ConfigError when the trained-policy adapters cannot be imported (no `policy` extra)."""
    try:
        import steerable.runtime.policy_adapter  # noqa: F401  # imported here to say why it is missing
    except ImportError as exc:
        raise ConfigError(
            "the trained-policy adapters (steerable.runtime.policy_adapter) are not available in this install "
            f"({exc}); use --high_level scripted|vlm and --low_level scripted, or install steerable[policy]"
        ) from exc


def _no_scripted(env: Environment, flag: str, role: str) -> ConfigError:
    return ConfigError(f"{flag} scripted: this environment ({type(env).__name__}) has no scripted {role} (a test "
                       f"double); choose another {flag}")


def check_scripted(spec: StackSpec, env: Environment) -> None:
    """Raise ConfigError now when `spec` asks for a scripted model `env` does not have."""
    if spec.high_level == "scripted" and not isinstance(env, ScriptsPlanner):
        raise _no_scripted(env, "--high_level", "planner")
    if spec.low_level == "scripted" and not isinstance(env, ScriptsController):
        raise _no_scripted(env, "--low_level", "controller")


def build_high(spec: StackSpec, env: Environment) -> HighLevelModel | None:
    if spec.high_level == "none":
        return None
    if spec.high_level == "scripted":
        if not isinstance(env, ScriptsPlanner):
            raise _no_scripted(env, "--high_level", "planner")
        planner = env.scripted_planner()
        if not isinstance(planner, HighLevelModel):
            raise ConfigError(f"--high_level scripted: {type(env).__name__}.scripted_planner() is no HighLevelModel")
        return planner
    if spec.high_level == "vlm":
        from steerable.runtime.vlm_planner import VLMPlanner

        assert spec.vlm is not None  # StackSpec's own check
        return VLMPlanner.from_config(spec.vlm, recipe=spec.recipe)
    _require_policy_runtime()
    from steerable.runtime.policy_adapter import load_high_level, low_level_reports_done

    assert spec.policy_path is not None  # StackSpec's own check
    # The scripted controller reports each command done, and so does the policy's own low level when
    # it learned when a command is complete (its done head); over any other low level the policy
    # reads progress from the observation.
    reports_done = spec.low_level == "scripted" or (
        spec.low_level == "policy" and low_level_reports_done(spec.policy_path, spec.device))
    return load_high_level(spec.policy_path, spec.device, spec.observation, progress_from_observation=not reports_done,
                           step_check=spec.step_check)


def build_low(spec: StackSpec, env: Environment) -> LowLevelController:
    if spec.low_level == "scripted":
        if not isinstance(env, ScriptsController):
            raise _no_scripted(env, "--low_level", "controller")
        controller = env.scripted_controller()
        if not isinstance(controller, LowLevelController):
            raise ConfigError(f"--low_level scripted: {type(env).__name__}.scripted_controller() is no "
                              "LowLevelController")
        return controller
    if spec.low_level == "lerobot":
        from steerable.runtime.lerobot.policy import load_lerobot_policy

        options = spec.lerobot
        lerobot: LowLevelController = load_lerobot_policy(
            options.policy_path, env, observation=spec.observation, device=options.device, dataset=options.dataset)
        return lerobot
    if spec.policy_server is not None:
        from steerable.runtime.remote_policy import connect_policy

        remote: LowLevelController = connect_policy(spec.policy_server, spec.observation, token=spec.policy_token)
        return remote
    _require_policy_runtime()
    from steerable.runtime.policy_adapter import load_low_level

    assert spec.policy_path is not None  # StackSpec's own check
    return load_low_level(spec.policy_path, spec.device, spec.observation, flow_noise=spec.flow_noise)
