"""The settings of `steerable train`: a training run (`TrainConfig`) and its `--policy.*` section.

Torch-free, so `steerable train --help` and parsing the flags cost nothing. The `--policy.*` flags
are generated from the `PolicyConfig` dataclass (its types and defaults; the help text below), so a
new policy setting is a flag once it has a help line; the sizes read from the dataset are not flags.
"""

from __future__ import annotations

import dataclasses
import typing
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BeforeValidator, ConfigDict, Field, field_validator, model_validator

from steerable.policy.config import AUTO_ACTION_KEY, AUTO_STATE_KEY, PolicyConfig
from steerable.policy.schedule import parse_duration
from steerable.settings import Episodes, Settings, episodes_field

__all__ = ["GOAL_PHASE_STEPS", "PolicySettings", "TrainConfig", "TrainSettings"]

# The goal head's own phase by default (`--goal_pretrain_steps`): on the 200 easy episodes its held-out error
# stopped falling by then (1.0-1.9 cm; twice as long, 1.6 cm: docs/policy.md "From pixels").
GOAL_PHASE_STEPS = 2500
FROM_DATASET = ("state_dim", "action_dim", "state_names", "action_names", "objects", "object_tokens", "located")
_POLICY_HELP = {
    "backbone": "'tiny' (built in code, random weights) or a local folder with a SmolVLM/Idefics3 model",
    "cameras": "comma-separated camera keys (default: every camera of the dataset; none: no camera)",
    "state_key": "state feature, or several comma-separated, concatenated in that order (auto: observation.state, "
                 "else state, as annotate picks it; plus observation.environment_state when the dataset has it)",
    "action_key": "action feature (auto: action, else actions, as annotate picks it)",
    "chunk_size": "actions predicted per chunk",
    "n_action_steps": "actions of a chunk executed before the next inference (at most chunk_size)",
    "image_size": "side in pixels the camera images are resized to",
    "image_shift": "training only: shift each camera image by up to this many pixels at random (edge pixels "
                   "repeated), a new shift per image and step; 0: off",
    "keypoints": "per camera, this many keypoint tokens in the prefix: points a small convolutional net finds "
                 "in the image, read by the text and the action expert (docs/policy.md, \"The camera path\"; 0: none)",
    "keypoint_width": "channels of the keypoint net's convolutions",
    "state_mode": "projector (one state token), bins (one 256-bin token per state value), or none",
    "action_mode": "relative (pose dimensions as offsets from the current state) or absolute",
    "skip_pauses": "true: frames where the demonstration held still train no actions, chunks skip them",
    "motion_input": "true: the last commanded motion joins the state (default: true, false for a policy with a "
                    "goal head, one with cameras whose state holds no object)",
    "ground_objects": "true: the action expert reads, at each word that names an object the dataset describes "
                      "(meta/objects.json), that object's state",
    "fine_offsets": "true: a named object's offset from the end effector is also read magnified (tanh of the "
                    "normalised offset times each of the object description's fine_offsets), so a gripper just "
                    "beside an object reads unlike one above it",
    "expert_reads_state": "true: the action expert reads the state as one more token",
    "done_head": "true: learn when a command is complete, so the learned low level reports it done",
    "done_loss_weight": "weight of the done head's loss",
    "goal_head": "learn where each command ends (the state at the end of its segment) from the cameras and the "
                 "command's words, and let the action expert read it (docs/policy.md, \"From pixels\"; built only "
                 "for a policy with cameras whose state does not hold the named objects, without keypoints or a "
                 "locator; false: never)",
    "goal_loss_weight": "weight of the goal head's loss",
    "goal_coords": "true: the goal head's convolutions also read each pixel's coordinates (heads before stop 51; "
    "without them it found the goal on new scenes better)",
    "check_reads_goal": "true: with a goal head, the step check reads what the head found of the command's "
                        "words in each camera, learnt from the frames where each command started against those "
                        "where it was done (docs/policy.md, \"Checking a step from the cameras\")",
    "step_check": "true: the done head also learns whether a command reported done took, so the learned high "
                  "level does a step again when the scene shows it did not (docs/policy.md, \"Checking a step\"; "
                  "off with --policy.locate_key)",
    "check_context": "true: the step check also reads the done head's pooled context, not only where the moved "
                     "object stands from its target",
    "check_clearance": "--policy.step_check's counter-examples put the moved object at least this far from its "
                       "target's centre, in the state's units (0: the object description's check_clearance)",
    "name_slots": "groups of interchangeable names, e.g. '[[mug, cup], [tray, shelf]]': the plan, memory, "
                  "interjection and subtask prompts name them canonically, by order of appearance (docs/policy.md, "
                  "\"Name slots\"; default: none)",
    "object_name_slots": "true: without --policy.name_slots, the objects the dataset describes (meta/objects.json), "
                         "grouped by their kind, are the name slots",
    "locate_key": "a state feature the dataset records (e.g. observation.environment_state) that the policy learns "
                  "to estimate from a camera and then runs without (docs/policy.md, \"From cameras\"; default: none)",
    "locate_camera": "the camera --policy.locate_key is estimated from (default: the first camera)",
    "locate_width": "channels of the locator's convolutions",
    "locate_loss_weight": "weight of the locator's loss",
    "state_bins": "bins of --policy.state_mode bins",
    "expert_layers": "how many of the last backbone layers the action expert reads",
    "expert_hidden": "width of the action expert (a multiple of --policy.expert_heads)",
    "expert_heads": "attention heads of the action expert",
    "freeze_vision": "true: do not train the vision encoder",
    "flow_steps": "Euler steps when sampling an action chunk",
    "flow_noise": "scale of the noise an action chunk is integrated from at run time (0: from the prior's mean, "
                  "the same chunk for the same observation; 1: a sample)",
    "flow_samples": "noise draws per action sample in the flow loss (they share one backbone pass)",
    "text_loss_weight": "weight of the text (subtask, plan, memory, speech) loss",
    "flow_loss_weight": "weight of the flow-matching action loss",
    "max_length": "most tokens of a prompt plus its target",
    "tiny_hidden": "tiny backbone: text tower width",
    "tiny_layers": "tiny backbone: text tower layers",
    "tiny_heads": "tiny backbone: text tower attention heads",
    "tiny_vision_hidden": "tiny backbone: vision tower width",
    "tiny_vision_layers": "tiny backbone: vision tower layers",
    "tiny_patch_size": "tiny backbone: vision patch size in pixels",
    "tiny_vocab_size": "tiny backbone: tokenizer vocabulary size",
}


class PolicySettings(Settings):
    """The `--policy.*` flags: how to build a fresh policy (a resumed run keeps its checkpoint's)."""

    model_config = ConfigDict(extra="forbid")
    section: ClassVar[str] = "policy"

    # One field per PolicyConfig setting, with its default (see the module docstring).
    _hints = typing.get_type_hints(PolicyConfig)
    _defaults = PolicyConfig(state_key=AUTO_STATE_KEY, action_key=AUTO_ACTION_KEY)
    for _f in dataclasses.fields(PolicyConfig):
        if _f.name not in FROM_DATASET:
            __annotations__[_f.name] = _hints[_f.name]
            locals()[_f.name] = Field(getattr(_defaults, _f.name), description=_POLICY_HELP.get(_f.name, ""))
    del _hints, _defaults, _f

    @field_validator("name_slots", mode="before")
    @classmethod
    def _groups(cls, value: Any) -> Any:
        """Words that are no groups (`synthetic`, the preset this flag once had) said so in one line."""
        words = [value] if isinstance(value, str) else value
        if not isinstance(words, list) or not words or not all(isinstance(w, str) for w in words):
            return value  # groups (or nothing), checked as such
        raise ValueError(f"{','.join(w.strip() for w in words)!r} is not a list of name groups ('[[mug, cup], "
                         "[tray, shelf]]'); the kinds of the objects a dataset describes (meta/objects.json) are "
                         "its default groups")

    @model_validator(mode="after")
    def _buildable(self) -> PolicySettings:
        PolicyConfig.from_dict(self.overrides())  # its own checks (ConfigError naming --policy.*)
        return self

    def overrides(self) -> dict[str, Any]:
        """The settings as `PolicyConfig` fields (what `setup.dataset_policy_config` completes)."""
        return self.model_dump()


class TrainConfig(Settings):
    """A training run: data, recipe, policy, optimisation, evaluation and checkpoint cadence."""

    model_config = ConfigDict(extra="forbid")
    doc: ClassVar[str | None] = "docs/train.md"

    dataset: Path = Field(description="annotated LeRobot v3 dataset folder")
    output_dir: Path = Field(description="where checkpoints and logs.jsonl go (resumes from one there)")
    recipe: str = Field("hierarchical", description="built-in recipe name or YAML path")
    episodes: Episodes = episodes_field(
        "train (and hold out) only these episodes, e.g. 0,3,7-9 (default: every episode; a resumed run keeps its own)"
    )
    policy: PolicySettings = Field(default_factory=PolicySettings)
    steps: int = Field(2500, description="optimizer steps")
    time_budget: Annotated[float | None, BeforeValidator(parse_duration)] = Field(
        None, description="end the run after this much training time (seconds, or 20m, 1.5h) if --steps has not "
        "ended it first; the learning rate decays over whichever runs out first (a resumed run counts its "
        "checkpoint's time)"
    )
    time_clock: Literal["wall", "cpu"] = Field(
        "wall", description="what --time_budget counts: wall-clock seconds of the training loop, or CPU seconds "
        "of this process (fair on a machine shared with other jobs)"
    )
    batch_size: int = Field(
        32, description="samples per step and process (the global batch is processes x batch_size x grad_accum; "
        "a resumed run keeps its global batch)"
    )
    grad_accum: int = Field(1, ge=1, description="micro-batches of --batch_size per optimizer step (gradient "
                            "accumulation)")
    parallel: Literal["ddp", "fsdp"] = Field(
        "ddp", description="under a launcher with several processes: ddp (each holds the whole model) or fsdp "
        "(the backbone's layers and the rest sharded over the processes; checkpoints are written whole)"
    )
    lr: float = Field(1e-3, gt=0, description="peak learning rate")
    weight_decay: float = Field(0.01, ge=0, description="AdamW weight decay")
    warmup_steps: int = Field(100, ge=0, description="steps of linear learning-rate warm-up")
    grad_clip: float = Field(1.0, gt=0, description="gradient norm clip")
    goal_pretrain_steps: int | None = Field(
        None, ge=0, description="a policy with a goal head (--policy.goal_head) first trains it alone this many "
        "steps (batch 64, at --goal_pretrain_lr, images shifted by --policy.image_shift), keeps the moving average "
        "of its weights that read best on the held-out episodes, then holds it fixed (docs/policy.md, 'From pixels'; "
        f"default: {GOAL_PHASE_STEPS}, or --steps when fewer; 0: trained with the rest)"
    )
    goal_pretrain_lr: float = Field(3e-3, gt=0, description="the goal head's own phase's constant learning rate")
    goal_pretrain_items: int = Field(8000, ge=64, description="low-level items the goal head's own phase decodes")
    ema_decay: float = Field(
        0.999, ge=0, lt=1, description="checkpoints hold a moving average of the weights with this decay, warmed up "
        "as (1 + step) / (10 + step) (0: the weights themselves; a resumed run keeps its own)"
    )
    eval_every: int = Field(500, description="steps between held-out evaluations")
    eval_fraction: float = Field(0.1, description="share of episodes held out")
    eval_batches: int = Field(4, ge=1, description="batches scored at each held-out evaluation")
    eval_text_cases: int = Field(64, ge=0, description="held-out frames whose generated text is scored")
    save_every: int = Field(500, description="steps between checkpoints")
    log_every: int = Field(25, description="steps between lines of logs.jsonl")
    seed: int = Field(0, description="seed of the episode split, data order and initial weights")
    device: str = Field("cpu", description="cpu or cuda[:N] (bf16 autocast on cuda)")
    num_workers: int = Field(0, ge=0, description="DataLoader worker processes")
    action_batch_size: int = Field(
        32, ge=0, description="extra low-level samples per step, through the recipe's action component alone "
        "(0: none; a resumed run keeps its own)"
    )
    event_repeat: int = Field(
        16, description="extra samples per event frame (interjection, spoken reply) for the components "
        "that read events (0: none)"
    )
    text_noise: float = Field(
        0.0, ge=0, lt=1, description="training only: each word of a task or of a user row (an interjection) that "
        "a sample's text target does not repeat is, with this probability, replaced by a made-up word, dropped "
        "or preceded by a made-up word (docs/policy.md, \"Held-out phrasings\"; 0: none)"
    )
    threads: int | None = Field(
        None, description="torch CPU threads (default: 1 for the tiny backbone, torch's default otherwise)"
    )
    progress: bool = Field(True, description="progress bar on stderr")

    @field_validator("steps", "batch_size", "eval_every", "save_every", "log_every", "threads")
    @classmethod
    def _at_least_one(cls, value: int | None) -> int | None:
        if value is not None and value < 1:
            raise ValueError(f"must be at least 1, got {value}")
        return value

    @field_validator("event_repeat")
    @classmethod
    def _not_negative(cls, value: int) -> int:
        if value < 0:
            raise ValueError(f"must be >= 0, got {value}")
        return value

    @field_validator("eval_fraction")
    @classmethod
    def _share(cls, value: float) -> float:
        if not 0 <= value < 1:
            raise ValueError(f"must be in [0, 1), got {value}")
        return value

    @field_validator("device")
    @classmethod
    def _device(cls, value: str) -> str:
        if value != "cpu" and not value.startswith("cuda"):
            raise ValueError(f"must be cpu or cuda[:N], got {value!r}")
        return value


class TrainSettings(TrainConfig):
    """`steerable train`: a training run, then optionally an upload of its final checkpoint."""

    push_to_hub: str | None = Field(None, description="upload the final checkpoint to this Hub model repo (REPO_ID)")
    private: bool = Field(False, description="with --push_to_hub: create the repo private")
