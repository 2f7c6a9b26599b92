"""The policy's configuration: backbone, action expert, state encoding, losses; saved as JSON.

One dataclass holds everything a checkpoint needs to rebuild the same network, so loading a
checkpoint never depends on the flags of the run that made it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal

from steerable.errors import ConfigError
from steerable.policy.names import NameSlots
from steerable.policy.objects import object_layout

__all__ = ["AUTO_ACTION_KEY", "AUTO_STATE_KEY", "UNSAVED_BEFORE", "ActionMode", "PolicyConfig", "StateMode"]

StateMode = Literal["bins", "projector", "none"]
ActionMode = Literal["relative", "absolute"]
# State keys that mean "the dataset's robot state, plus the privileged environment state when it has one".
AUTO_STATE_KEY = "auto"
# The action key that means "the dataset's action feature, found by its name" (`action`, `actions`).
AUTO_ACTION_KEY = "auto"
# Settings that checkpoints written before they existed do not name (the names, object tokens and
# relative actions came with the low level that acts, see docs/policy.md), and the values that
# rebuild and run those checkpoints' networks as they were trained.
UNSAVED_BEFORE: dict[str, Any] = {
    "action_mode": "absolute", "skip_pauses": False, "motion_input": False, "ground_objects": False,
    "expert_reads_state": False, "flow_samples": 1, "done_head": False, "step_check": False, "flow_noise": 1.0,
    "fine_offsets": False, "object_name_slots": False, "check_context": True, "goal_head": False,
    "goal_coords": True, "check_reads_goal": False,
}


@dataclass
class PolicyConfig:
    """How to build the hierarchical policy.

    `backbone` is `"tiny"` (an Idefics3 model with a small Llama text tower and a small SigLIP
    vision tower, built in code with random weights) or a local folder holding an
    `AutoModelForImageTextToText` checkpoint and its tokenizer (SmolVLM / Idefics3 family).
    `state_mode`: `"bins"` puts the normalised state into the prefix as one token per dimension,
    discretised into `state_bins` bins over [-1, 1]; `"projector"` projects the state to one prefix
    token; `"none"` leaves it out. The action expert reads the outputs of the last `expert_layers`
    backbone layers (one expert layer per backbone layer read). `state_key` names one state feature,
    or several comma-separated (`observation.state,observation.environment_state`), concatenated in
    that order into one state vector of `state_dim` values (`state_keys` lists them).

    What the action expert reads and predicts (docs/policy.md, "What made the low level act"):
    `action_mode` `"relative"` predicts the action dimensions that share a name with a state
    dimension (`ee.x`, ...; gripper dimensions excepted) as offsets from the current state, the rest
    as they are; `skip_pauses` trains the actions without the frames where the demonstration held
    still (its command repeats the previous one); `motion_input` adds the last commanded motion of
    those dimensions to the state; `ground_objects` adds, to every text token that names an object of
    the dataset's object description (`objects`, from its `meta/objects.json`: `steerable.policy.objects`),
    that object's state (its position and its offset from the end effector), in what the action expert
    reads. `state_names`, `action_names`, `objects` and `object_tokens` (per object, the token ids that
    name it alone) are filled from the dataset and the tokenizer.
    `expert_reads_state` gives the action expert the model state as one more context token.
    `done_head` adds a classifier, over what the expert reads, of whether the command is complete:
    the learned low level then reports its command done, as the scripted controller does, so a high
    level over it advances the plan the same way.
    """

    backbone: str = "tiny"
    cameras: list[str] = field(default_factory=list)
    state_key: str = "observation.state"
    action_key: str = "action"
    state_dim: int = 0
    action_dim: int = 0
    state_names: list[str] = field(default_factory=list)
    action_names: list[str] = field(default_factory=list)
    # The objects the state tracks, where, and the world's lengths (`objects.ObjectLayout.to_dict`); {}: none.
    objects: dict[str, Any] = field(default_factory=dict)
    object_tokens: list[list[int]] = field(default_factory=list)
    chunk_size: int = 10
    # Half a chunk between inferences: the policy sees the scene (and its done head asks whether the
    # command is complete) twice as often as with 8 of 10, which on the simulator took the learned low
    # level from 0.43 to 0.77 as both levels (docs/policy.md, "What made the low level act").
    n_action_steps: int = 5
    image_size: int = 32
    # Training only: each camera image shifted by up to this many pixels (edge pixels repeated), a new
    # shift per image and step; 0: off. Nothing changes at run time.
    image_shift: int = 0
    # Per camera, this many keypoint tokens in the prefix (`steerable.policy.keypoints`); 0: none.
    keypoints: int = 0
    keypoint_width: int = 16
    state_mode: StateMode = "projector"
    action_mode: ActionMode = "relative"
    skip_pauses: bool = True
    # Off for a policy with a goal head unless asked for (`setup.dataset_policy_config`, stop 54).
    motion_input: bool = True
    ground_objects: bool = True
    fine_offsets: bool = True
    expert_reads_state: bool = True
    done_head: bool = True
    # A second output of the done head: whether a command reported done took (the object it moves is
    # where it should be), learnt from copies of the done frames with that object moved beside its
    # target (`steerable.policy.counterexamples.moved_away`); on by default since it raised the learned high level
    # over the learned low level on each of six trainings (docs/policy.md, "Checking a step"). Off with
    # `locate_key` (see `validate`).
    step_check: bool = True
    # 0: the object description's clearance (`objects`' scales); more: this one, in the state's units.
    check_clearance: float = 0.0
    check_context: bool = False
    name_slots: list[list[str]] = field(default_factory=list)
    # Without `name_slots`, the names of the described objects, grouped by kind
    # (`objects.ObjectLayout.name_groups`), are the name slots (filled in when the policy is built).
    object_name_slots: bool = True
    # A state feature (the last of `state_key`) estimated from a camera instead of read
    # (`steerable.policy.locate`): `located` is its width, `locate_camera` the camera (default: the first).
    locate_key: str = ""
    located: int = 0
    locate_camera: str = ""
    locate_width: int = 32
    locate_loss_weight: float = 1.0
    done_loss_weight: float = 1.0
    # Where the current command ends, predicted from the cameras and the command (`steerable.policy.goal`),
    # learnt from where each command's segment ended in the demonstrations; the expert reads it. Built for
    # a policy with cameras whose state holds no named object (`HierarchicalPolicy`); trained first, alone
    # (`--goal_pretrain_steps`), 1.0-1.9 cm and 0.18-0.32 under the scripted planner from cameras alone,
    # where without it 0.00 (docs/policy.md, "From pixels"). Keypoints and a locator give the goal instead.
    goal_head: bool = True
    goal_loss_weight: float = 1.0
    # The head's convolutions also read each pixel's coordinates (CoordConv; heads before stop 51). Without
    # them a feature cannot say where it is, only what is there, and the head generalised to new scenes
    # better (4.9 against 8.8 cm on one task's held-out scenes, docs/policy.md "From pixels").
    goal_coords: bool = False
    # With a goal head, the step check reads what the head found of the command's words in each camera
    # (a cube a pick names, in the gripper or not), learnt from the frames where each command started
    # (it had not taken yet) against those where it was done: a check without an object description.
    check_reads_goal: bool = True
    state_bins: int = 256
    expert_layers: int = 2
    expert_hidden: int = 64
    expert_heads: int = 4
    freeze_vision: bool = False
    flow_steps: int = 10
    # The scale of the noise an action chunk is integrated from at run time. 0, the default: the flow's
    # path from the prior's mean, the same chunk for the same observation; 1: a sample. A sample's
    # spread is what put a small policy's cube 1-2 cm beside its bin (docs/policy.md, "What made the
    # low level act"). Training does not read it; a checkpoint's config carries it.
    flow_noise: float = 0.0
    flow_samples: int = 4
    text_loss_weight: float = 1.0
    flow_loss_weight: float = 1.0
    max_length: int = 256
    # Tiny backbone sizes (ignored for a backbone loaded from a folder).
    tiny_hidden: int = 64
    tiny_layers: int = 2
    tiny_heads: int = 4
    tiny_vision_hidden: int = 32
    tiny_vision_layers: int = 1
    tiny_patch_size: int = 8
    tiny_vocab_size: int = 512

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        if not self.state_keys:
            raise ConfigError(f"policy.state_key names no feature: {self.state_key!r}")
        if self.state_mode not in ("bins", "projector", "none"):
            raise ConfigError(f"state_mode must be bins, projector or none, got {self.state_mode!r}")
        if self.action_mode not in ("relative", "absolute"):
            raise ConfigError(f"action_mode must be relative or absolute, got {self.action_mode!r}")
        if self.state_names and len(self.state_names) != self.state_dim:
            raise ConfigError(f"policy.state_names has {len(self.state_names)} names for state_dim {self.state_dim}")
        if self.action_names and len(self.action_names) != self.action_dim:
            raise ConfigError(f"policy.action_names has {len(self.action_names)} names for action_dim "
                              f"{self.action_dim}")
        positive = ("chunk_size", "n_action_steps", "image_size", "state_bins", "expert_layers", "expert_hidden",
                    "expert_heads", "flow_steps", "flow_samples", "max_length", "tiny_hidden", "tiny_layers",
                    "tiny_heads")
        for name in positive:
            if int(getattr(self, name)) < 1:
                raise ConfigError(f"policy.{name} must be at least 1, got {getattr(self, name)}")
        if not 0 <= self.image_shift < self.image_size // 2:
            raise ConfigError(f"policy.image_shift must be between 0 and {self.image_size // 2 - 1} for "
                              f"policy.image_size {self.image_size}, got {self.image_shift}")
        if self.keypoints < 0 or self.keypoint_width < 1:
            raise ConfigError(f"policy.keypoints must be at least 0 and policy.keypoint_width at least 1, got "
                              f"{self.keypoints} and {self.keypoint_width}")
        if self.goal_head and (self.keypoints or self.locate_key):
            # Keypoints choose a goal themselves, and a locator estimates the objects the goal would come
            # from: with either the policy has no goal head (on by default, so no choice to refuse).
            self.goal_head = False
        if not 0.0 <= self.flow_noise <= 10.0:
            raise ConfigError(f"policy.flow_noise must be between 0 and 10, got {self.flow_noise}")
        if self.n_action_steps > self.chunk_size:
            raise ConfigError(f"policy.n_action_steps ({self.n_action_steps}) cannot exceed "
                              f"policy.chunk_size ({self.chunk_size})")
        if self.expert_hidden % self.expert_heads:
            raise ConfigError(f"policy.expert_hidden ({self.expert_hidden}) must be a multiple of "
                              f"policy.expert_heads ({self.expert_heads})")
        if self.step_check and not self.done_head:
            raise ConfigError("policy.step_check needs policy.done_head true (it is a second output of that head)")
        if self.step_check and self.locate_key:
            # It learns from object positions moved in the state, which the locator overwrites with
            # its estimate from the camera: a policy with a locator has no step check.
            self.step_check = False
        if self.check_clearance < 0:
            raise ConfigError(f"policy.check_clearance must be >= 0 (0: the object description's), got "
                              f"{self.check_clearance}")
        object_layout(self)  # its own checks
        if (self.text_loss_weight < 0 or self.flow_loss_weight < 0 or self.done_loss_weight < 0
                or self.goal_loss_weight < 0):
            raise ConfigError("loss weights must be >= 0")
        NameSlots(self.name_slots)  # its own checks
        if self.locate_key and self.state_key.strip() != AUTO_STATE_KEY:  # "auto" is expanded by the setup
            if self.state_keys[-1] != self.locate_key.strip():
                raise ConfigError(f"policy.locate_key {self.locate_key!r} must be the last of policy.state_key "
                                  f"({self.state_key!r}): it is the feature the cameras stand in for")
            if len(self.state_keys) < 2:
                raise ConfigError("policy.locate_key needs another state feature to read (the robot's state)")
            if self.state_mode == "none":
                raise ConfigError("policy.locate_key needs a state (policy.state_mode projector or bins)")
            if self.locate_width < 1 or self.locate_loss_weight < 0:
                raise ConfigError("policy.locate_width must be at least 1 and policy.locate_loss_weight >= 0")

    @property
    def read_state_keys(self) -> list[str]:
        """The state features the policy is given at run time: `state_keys` without the located one."""
        return [k for k in self.state_keys if k != self.locate_key.strip()] if self.locate_key else self.state_keys

    @property
    def state_keys(self) -> list[str]:
        """The state features, in the order they are concatenated (`state_key` split on commas)."""
        return [k.strip() for k in self.state_key.split(",") if k.strip()]

    @property
    def is_tiny(self) -> bool:
        return self.backbone == "tiny"

    @property
    def pose_pairs(self) -> list[tuple[int, int]]:
        """(action index, state index) of the action dimensions that command a state dimension of the
        same name, gripper dimensions excepted (`ee.x` ...): the pose the robot is asked to reach."""
        where = {name: i for i, name in reversed(list(enumerate(self.state_names)))}
        return [(a, where[name]) for a, name in enumerate(self.action_names)
                if name in where and "gripper" not in name.lower()]

    @property
    def relative_pairs(self) -> list[tuple[int, int]]:
        """The `pose_pairs` predicted as offsets from the current state (none for `action_mode` absolute)."""
        return self.pose_pairs if self.action_mode == "relative" else []

    @property
    def motion_dim(self) -> int:
        """Values of the last commanded motion (of the `pose_pairs` dimensions) appended to the state."""
        return len(self.pose_pairs) if self.motion_input else 0

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PolicyConfig:
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise ConfigError(f"unknown policy setting(s) {unknown}; known: {sorted(names)}")
        return cls(**data)

    def override(self, **changes: Any) -> PolicyConfig:
        """A copy with `changes` applied (unknown names are a ConfigError)."""
        return PolicyConfig.from_dict({**self.to_dict(), **changes})
