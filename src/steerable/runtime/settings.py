"""The settings of `steerable run`: which models steer which environment, and how the session runs.

Every `steerable run` flag is a field here (`--policy.*`, `--lerobot.*` and `--vlm.*` are sections), so flags,
`--config FILE.yaml` and `--help` come from one definition, and every check of a combination runs
when the settings are built, before anything starts.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal

from pydantic import AfterValidator, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from steerable.errors import ConfigError
from steerable.runtime.stack import (
    HIGH_LEVELS,
    LOW_LEVELS,
    OBSERVATIONS,
    HighKind,
    LeRobotOptions,
    LowKind,
    ObservationKind,
    StackSpec,
    check_choice,
)
from steerable.settings import Episodes, Settings, episodes_field
from steerable.tools.voices import TTS_BACKENDS
from steerable.vlm.config import VLMConfig

if TYPE_CHECKING:
    from steerable.runtime.chunks import InferenceOptions
    from steerable.runtime.environments import EnvSpec

__all__ = [
    "CheckpointPath", "RunLeRobotSettings", "RunPolicySettings", "RunRTCSettings", "RunSettings", "checkpoint_folder",
]


def checkpoint_folder(value: str | None, flag: str = "--policy.path") -> str | None:
    """`value`, or the checkpoint folder it points at when it is a pointer file: `steerable train`'s
    `checkpoints/latest`, read by `steerable.policy.checkpoint.latest_name` (imported only for a file: the
    settings stay torch-free). Any other file is refused in one line."""
    if not value:
        return value
    path = Path(value).expanduser()
    if not path.is_file():
        return value  # a folder (or a Hub id, or nothing: the loader says so)
    from steerable.policy.checkpoint import CHECKPOINTS, LATEST, latest_name

    name = latest_name(path)
    if name is None:
        raise ConfigError(f"{flag} {value} is a file: pass a checkpoint folder, the training output folder, or its "
                          f"{CHECKPOINTS}/{LATEST}")
    target = path.parent / name
    if not target.is_dir():
        raise ConfigError(f"{flag} {value} points at {name}, which is not in {path.parent} (a checkpoint pruned or "
                          "moved?): pass a checkpoint folder that is there")
    return str(target)


# A `--policy.path` of run and serve-policy: the checkpoint folder, a pointer file read as the folder it names.
CheckpointPath = Annotated[str | None, AfterValidator(checkpoint_folder)]


class RunPolicySettings(Settings):
    """`--policy.*`: the trained checkpoint behind `--high_level policy` / `--low_level policy`."""

    model_config = ConfigDict(extra="forbid")
    section: ClassVar[str] = "policy"

    path: CheckpointPath = Field(None, description="a trained policy checkpoint (--*_level policy): its folder, the "
                             "training output folder, or its checkpoints/latest")
    device: str = Field("cpu", description="device for the policy")
    server: str | None = Field(
        None, description="HOST:PORT of a `steerable serve-policy`: the low level runs there (implies --low_level "
        "policy)"
    )
    token: str | None = Field(
        None, description="the token `steerable serve-policy` printed (default: the environment variable "
        "STEERABLE_POLICY_TOKEN)"
    )
    step_check: bool = Field(
        True, description="--high_level policy: a step reported done that the policy's step check says did not take "
        "is done again (a policy trained with --policy.step_check; false: always go on)"
    )
    flow_noise: float | None = Field(
        None, ge=0, description="--low_level policy: scale of the noise its action chunks are integrated from (0: "
        "the prior's mean; 1: a sample; default: the checkpoint's)"
    )


class RunRTCSettings(Settings):
    """`--rtc.*`: real-time chunking (`--inference rtc`), see steerable.runtime.chunks."""

    model_config = ConfigDict(extra="forbid")
    section: ClassVar[str] = "rtc"

    overlap: int = Field(16, ge=0, description="queued actions past the inference delay that a new chunk continues "
                         "(at most half of what a chunk leaves after the delay)")
    max_guidance: float = Field(5.0, ge=0, description="bound of the guidance weight pulling a flow policy's new "
                                "chunk onto the queued actions")
    schedule: Literal["exp", "linear"] = Field(
        "exp", description="how the soft mask decays over the queued actions after the steps executed during "
        "inference: exp | linear"
    )


class RunLeRobotSettings(Settings):
    """`--lerobot.*`: the LeRobot policy behind `--low_level lerobot` (extra `lerobot`, Python >= 3.12)."""

    model_config = ConfigDict(extra="forbid")
    section: ClassVar[str] = "lerobot"

    policy_path: str | None = Field(
        None, description="a LeRobot policy: the folder its save_pretrained wrote (with its processors), or a Hub id"
    )
    device: str = Field("cpu", description="device for the LeRobot policy (cpu, cuda, mps)")
    dataset: str | None = Field(
        None, description="the LeRobot dataset folder the policy was trained on: its meta/info.json names the state "
        "and action dimensions (default: the dataset in the checkpoint's train_config.json)"
    )

    def options(self) -> LeRobotOptions:
        """The stack's LeRobot options (`steerable.runtime.lerobot.policy.load_lerobot_policy`'s)."""
        return LeRobotOptions(self.policy_path, self.device, self.dataset)


class RunSettings(Settings):
    """Everything `steerable run` does: a session (REPL, commands file, recording), an evaluation, or the
    replay of a synthetic dataset's actions."""

    model_config = ConfigDict(extra="forbid")
    doc: ClassVar[str | None] = "docs/run.md"
    pass_through: ClassVar[dict[str, str]] = {"env": "env_options", "robot": "robot"}  # flag section: field

    env: str = Field("sim", description="environment, by its name in steerable.runtime.environments (sim: the "
                     "synthetic tabletop; lerobot: a LeRobot simulator, --env.type=pusht; robot: a LeRobot robot)")
    # LeRobot's own flags, passed through as typed (`pass_through`): `--env.type=pusht`, `--robot.port=...`.
    env_options: dict[str, Any] = Field(
        default_factory=dict, description="options of the --env as --env.KEY=VALUE; for --env lerobot LeRobot's own "
        "env flags (--env.type=pusht [--env.task=...])"
    )
    robot: dict[str, Any] = Field(
        default_factory=dict, description="a LeRobot robot, in LeRobot's own flags (--robot.type=so101_follower "
        "--robot.port=/dev/ttyACM0 --robot.id=NAME [--robot.cameras=...]; --robot.max_relative_target=N: the most a "
        "target moves per step); implies --env robot"
    )
    camera_shapes: str | None = Field(
        None, description="--env sim: equal (the default: both cameras 224x160) | legacy (the wrist camera 128x128, "
        "as synthetic datasets made before; for policies trained on them)"
    )
    high_level: HighKind = Field("scripted", description=f"{' | '.join(HIGH_LEVELS)} (none: direct task)")
    low_level: LowKind = Field(
        "scripted", description=f"{' | '.join(LOW_LEVELS)} (lerobot: a LeRobot policy, --lerobot.*)"
    )
    policy: RunPolicySettings = Field(default_factory=RunPolicySettings)
    lerobot: RunLeRobotSettings = Field(default_factory=RunLeRobotSettings)
    observation: ObservationKind = Field(
        "standard", description=f"{' | '.join(OBSERVATIONS)} (privileged, simulator only: a policy may read every "
        "object's true position, observation.environment_state, as trained with make-dataset --privileged_state)"
    )
    vlm: VLMConfig = Field(default_factory=VLMConfig)  # the server behind --high_level vlm
    recipe: str | None = Field(None, description="recipe (builtin name or YAML) laying out the high-level prompt")
    task: str | None = Field(None, description="the task to start with")
    seed: int | None = Field(None, description="scene seed (default: the first scene where --task fits, else 0)")
    commands: Path | None = Field(None, description="play REPL lines from FILE ('@2.5s text' times)")
    record: Path | None = Field(None, description="record the rollout as a LeRobot v3 dataset in DIR")
    tts: str = Field("text", description=f"voice of `say`: {' | '.join(TTS_BACKENDS)}")
    ctrl_hz: float = Field(15.0, description="action dispatch rate (the simulator's fps)")
    chunk_hz: float = Field(5.0, description="most action-chunk inferences per second")
    high_level_hz: float = Field(1.0, description="periodic high-level update rate")
    realtime: bool = Field(False, description="pace --commands runs at the control rate")
    inference: Literal["sync", "async", "rtc"] = Field(
        "sync", description="chunk inference: sync (in the tick) | async (beside the loop, started early, aligned to "
        "the ticks that passed) | rtc (async, the new chunk continuing the motion under way)"
    )
    rtc: RunRTCSettings = Field(default_factory=RunRTCSettings)
    max_seconds: float | None = Field(
        None, description="simulated time limit of a run (300) or of each eval episode (90)"
    )
    eval_episodes: int | None = Field(None, description="evaluate N seeded episodes, no person")
    eval_interjections: bool = Field(False, description="interject a target change mid-way")
    eval_difficulty: str | None = Field(
        None, description="task mix: easy | realistic | hard (as make-dataset; default: the mix a --policy.path "
        "policy was trained on, else easy)"
    )
    eval_phrasings: Literal["seen", "unseen", "both"] = Field(
        "seen", description="task and interjection wording: seen (as the synthetic data) | unseen (held-out "
        "paraphrases) | both (each seed once in each, side by side)"
    )
    workers: int | None = Field(None, description="evaluation processes (default: one per core)")
    replay: Path | None = Field(
        None, description="replay a synthetic DATASET's recorded actions in the simulator, each episode from its "
        "own scene, and compare the outcome with the recorded one"
    )
    episodes: Episodes = episodes_field("with --replay: these episodes, e.g. 0-9 or 0,3,7-9 (default: every episode)")
    # `json` would shadow BaseModel.json: the field has another name, the flag keeps its own.
    as_json: bool = Field(
        False, alias="json", description="with --eval_episodes or --replay: print one JSON object"
    )
    display: Literal["none", "rerun"] = Field(
        "none", description="none | rerun: stream cameras, language context, events and loop rates to Rerun "
        "([rerun] extra)"
    )
    display_to: str | None = Field(
        None, description="with --display rerun: a running viewer (rerun+http://HOST:9876/proxy) or a file "
        "FILE.rrd (default: spawn a viewer)"
    )

    @field_validator("env")
    @classmethod
    def _env(cls, value: str) -> str:
        from steerable.runtime.environments import EnvSpec

        EnvSpec(value)  # a registered name (its own message lists them)
        return value

    @field_validator("high_level", "low_level", "observation", mode="before")
    @classmethod
    def _kind(cls, value: object, info: ValidationInfo) -> object:
        choices = {"high_level": HIGH_LEVELS, "low_level": LOW_LEVELS, "observation": OBSERVATIONS}
        check_choice(f"--{info.field_name}", value, choices[str(info.field_name)])
        return value

    @field_validator("ctrl_hz", "chunk_hz", "high_level_hz")
    @classmethod
    def _positive_rate(cls, value: float) -> float:
        if value <= 0:
            raise ValueError(f"must be positive, got {value:g}")
        return value

    @field_validator("tts")
    @classmethod
    def _tts(cls, value: str) -> str:
        check_choice("--tts", value, TTS_BACKENDS)
        return value

    @field_validator("task")
    @classmethod
    def _task(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ConfigError("--task is empty: say what the robot should do, e.g. --task 'put the red cube in the "
                              "blue bin'")
        return value

    @field_validator("max_seconds")
    @classmethod
    def _max_seconds(cls, value: float | None) -> float | None:
        if value is not None and value <= 0:
            raise ConfigError("--max_seconds must be positive")
        return value

    @field_validator("eval_episodes", "workers")
    @classmethod
    def _at_least_one(cls, value: int | None, info: ValidationInfo) -> int | None:
        if value is not None and value < 1:
            raise ConfigError(f"--{info.field_name} must be at least 1, got {value}")
        return value

    @model_validator(mode="after")
    def _combinations(self) -> RunSettings:
        evaluating = self.eval_episodes is not None
        if self.policy.token is not None and self.policy.server is None:
            raise ConfigError("--policy.token is the token of a policy server: add --policy.server HOST:PORT")
        if self.policy.server is not None:
            if "low_level" in self.model_fields_set and self.low_level != "policy":
                raise ConfigError(f"--policy.server serves the low level: it does not combine with --low_level "
                                  f"{self.low_level}")
            self.low_level = "policy"
        if self.policy.path:
            self._levels_of_policy_path()
        if self.robot:
            if "env" in self.model_fields_set and self.env != "robot":
                raise ConfigError(f"--robot.* runs a LeRobot robot (--env robot); it does not combine with "
                                  f"--env {self.env}")
            self.env = "robot"
            if evaluating:
                raise ConfigError("--eval_episodes scores seeded episodes in a simulator; a robot (--robot.*) has no "
                                  "success signal and one body: steer it with a task or --commands")
        elif self.env == "robot":
            raise ConfigError("--env robot needs a LeRobot robot: --robot.type=TYPE and its flags (e.g. "
                              "--robot.type=so101_follower --robot.port=/dev/ttyACM0 --robot.id=my_arm)")
        if self.episodes is not None and self.replay is None:
            raise ConfigError("--episodes picks the episodes of --replay DATASET: add --replay")
        if self.replay is not None:
            others = [f"--{name}" for name, on in (("eval_episodes", evaluating), ("record", self.record is not None),
                                                     ("commands", self.commands is not None),
                                                     ("task", self.task is not None),
                                                     ("display", self.display != "none")) if on]
            if others:
                raise ConfigError(f"--replay replays a dataset's actions; it does not combine with {', '.join(others)}")
            if self.env != "sim":
                raise ConfigError(f"--replay replays in the simulator (--env sim), not --env {self.env}")
        if self.eval_phrasings != "seen" and not evaluating:
            raise ConfigError(f"--eval_phrasings {self.eval_phrasings} words the tasks of an evaluation: add "
                              "--eval_episodes N")
        if self.record is not None and evaluating:
            raise ConfigError("--record records one session; it does not combine with --eval_episodes")
        if self.display != "none" and evaluating:
            raise ConfigError("--display shows one session; it does not combine with --eval_episodes")
        if self.display_to is not None and self.display == "none":
            raise ConfigError("--display_to says where --display rerun streams to: add --display rerun")
        self.stack()  # the combinations of models StackSpec checks (a policy's --policy.path, a VLM's backend, ...)
        return self

    def _levels_of_policy_path(self) -> None:
        """Where `--policy.path` runs when no level names the policy: at both levels when neither is named (a
        checkpoint is the hierarchical policy), else at the one not named (`--high_level vlm`: the low level),
        as `--policy.server` is the low level. A level named `policy` keeps the other at its default
        (`--low_level policy`: the scripted planner over the trained low level, as always); two levels named,
        neither the policy, leave it nothing to run."""
        named = {level for level in ("high_level", "low_level") if level in self.model_fields_set}
        if "policy" in (self.high_level, self.low_level):
            return
        if len(named) == 2:
            raise ConfigError(f"--policy.path runs a trained policy at --high_level or --low_level policy; it does "
                              f"not combine with --high_level {self.high_level} --low_level {self.low_level}")
        if "high_level" not in named:
            self.high_level = "policy"
        if "low_level" not in named:
            self.low_level = "policy"

    def environment(self) -> EnvSpec:
        """The environment to build, with the options set on the command line."""
        from steerable.runtime.environments import EnvSpec

        options: dict[str, Any] = {"camera_shapes": self.camera_shapes} if self.camera_shapes is not None else {}
        options.update(self.env_options)
        if self.robot:
            options["robot"] = dict(self.robot)
        return EnvSpec(self.env, options)

    def stack(self) -> StackSpec:
        """The models to run, as plain data evaluation workers can rebuild."""
        return StackSpec(
            high_level=self.high_level, low_level=self.low_level, policy_path=self.policy.path,
            device=self.policy.device, vlm=self.vlm, recipe=self.recipe, fps=int(round(self.ctrl_hz)),
            observation=self.observation, lerobot=self.lerobot.options(), policy_server=self.policy.server,
            policy_token=self.policy.token,
            step_check=self.policy.step_check, flow_noise=self.policy.flow_noise,
        )

    def inference_options(self) -> InferenceOptions:
        """How chunks are inferred (`--inference`, `--rtc.*`)."""
        from steerable.runtime.chunks import InferenceOptions

        return InferenceOptions(self.inference, overlap=self.rtc.overlap, max_guidance=self.rtc.max_guidance,
                                schedule=self.rtc.schedule)
