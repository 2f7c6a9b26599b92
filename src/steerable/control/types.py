"""The control contract's data and model types: observations, action chunks, language, the two models.

Everything here is plain data plus `typing.Protocol`s, so an adapter (ours, a LeRobot policy
wrapper, `steerable.runtime.policy_adapter`) implements them without importing the runtime.

- A `HighLevelModel` reads the rendered prompt (`HighLevelRequest.messages`, laid out by the recipe
  the model was trained with), the live language context and the latest observation, and returns a
  `HighLevelUpdate`: a new subtask / plan / memory, speech, an answer, tool calls.
- A `LowLevelController` reads an observation and the current command (the subtask, or the task
  for a flat policy) and returns an `ActionChunk`: the next actions, and whether it is done with the
  command or could not execute it.
- A low level that can continue a chunk under way (`ContinuesChunks`: real-time chunking) also
  takes a `ChunkPrefix`, the queued actions its new chunk should start with.
- An `Environment` (`steerable.control.environment`: the simulator, a LeRobot env or robot) gives
  observations and takes actions.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np

__all__ = [
    "ENVIRONMENT_STATE_FEATURE",
    "ActionChunk",
    "ChunkPrefix",
    "ContinuesChunks",
    "HighLevelModel",
    "HighLevelRequest",
    "HighLevelUpdate",
    "LanguageContext",
    "LowLevelController",
    "Observation",
    "RequestKind",
    "ToolCall",
]

# The dataset feature (and policy state key) of `Observation.environment_state`, as LeRobot names it.
ENVIRONMENT_STATE_FEATURE = "observation.environment_state"

# "update": periodic / after the controller finished its command; "interjection": the operator
# said something (`user_text`); "ask": the operator asked a question about the scene (`user_text`).
RequestKind = Literal["update", "interjection", "ask"]


@dataclass(frozen=True)
class Observation:
    """One observation: proprioception, camera frames, and what only some environments give.

    `images` maps dataset camera keys (`observation.images.top`) to HxWx3 uint8 frames; it is empty
    when the env was asked not to render. `environment_state` is every object's position as one
    vector (`ENVIRONMENT_STATE_FEATURE`, laid out as its env's `environment_state_names`: an
    environment that `ProvidesEnvironmentState`), None where the env has none (a real robot).
    `privileged` is opaque to everyone but the environment that made it: its own test doubles read
    it (the simulator's scripted planner and controller: its true world state).
    """

    state: np.ndarray
    images: Mapping[str, np.ndarray] = field(default_factory=dict)
    time_s: float = 0.0
    state_names: tuple[str, ...] = ()
    privileged: object = None
    environment_state: np.ndarray | None = None


@dataclass(frozen=True)
class LanguageContext:
    """The live language state a model is conditioned on (a snapshot; None = not set)."""

    task: str = ""
    subtask: str | None = None
    plan: str | None = None
    memory: str | None = None
    revision: int = 0

    @property
    def command(self) -> str:
        """What a low-level controller executes: the subtask, or the task when there is none."""
        return self.subtask or self.task


@dataclass(frozen=True)
class ToolCall:
    """A model's call of a tool, arguments already decoded from JSON."""

    name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)

    def as_row_call(self) -> dict[str, Any]:
        """The call in the shape the `tool_calls` field of a language row stores."""
        return {"type": "function", "function": {"name": self.name, "arguments": dict(self.arguments)}}


@dataclass(frozen=True)
class HighLevelRequest:
    """What the runtime asks a high-level model.

    `messages` is the prompt rendered by the recipe for this request (chat messages, image blocks
    holding the current frames), `controller_done` says the low-level finished its command, and
    `controller_error` carries a command the controller could not execute.
    """

    kind: RequestKind
    context: LanguageContext
    observation: Observation | None
    messages: list[dict[str, Any]] = field(default_factory=list)
    user_text: str | None = None
    controller_done: bool = False
    controller_error: str | None = None


@dataclass(frozen=True)
class HighLevelUpdate:
    """A model's reply; a field left None keeps the current value, "" clears it.

    `speech` is said through the `say` tool (the runtime turns it into a `say` call); other tool
    calls go to `tool_calls`. `task_done` tells the runtime the task is complete.
    """

    subtask: str | None = None
    plan: str | None = None
    memory: str | None = None
    speech: str | None = None
    answer: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    task_done: bool = False


@runtime_checkable
class HighLevelModel(Protocol):
    """Generates the language context (and speech, answers, tool calls) for a task."""

    name: str

    def update(self, request: HighLevelRequest) -> HighLevelUpdate:
        """Answer `request`; raise (any exception) when no usable reply came: the runtime holds still."""
        ...

    def reset(self) -> None:
        """Forget per-episode state (a new task or scene follows)."""
        ...


@dataclass(frozen=True)
class ActionChunk:
    """The next actions, (n, action_dim) float32, to dispatch one per control tick.

    n == 0 means hold still. `done` says the command is complete (the runtime may then ask the
    high-level for the next one); `error` says the command could not be parsed or executed, and
    `refused` that it never can be in this scene (it names something the scene lacks): a mistake in
    the command, not a failure of the controller.
    """

    actions: np.ndarray
    done: bool = False
    error: str | None = None
    refused: bool = False


@runtime_checkable
class LowLevelController(Protocol):
    """Turns an observation and a command into actions (a policy, or the scripted controller)."""

    name: str

    def act(self, observation: Observation, command: str) -> ActionChunk:
        """The next chunk of actions for `command` given `observation`."""
        ...

    def reset(self) -> None:
        """Forget per-episode state (action queues of a policy, a scripted plan)."""
        ...


@dataclass(frozen=True)
class ChunkPrefix:
    """What a new chunk should start with (real-time chunking, `steerable run --inference rtc`).

    `actions` (m, action_dim) are the actions queued when the observation was taken, one per tick
    from that tick on: the first `delay` will have been executed before the new chunk arrives (the
    runtime's measured latency, in ticks), the rest are the motion under way it should continue.
    `weights` (m,) say how closely step i must follow `actions[i]` (1 for the executed steps, then
    decaying to 0: a soft mask); `max_guidance` bounds the guidance weight of a flow policy.
    """

    actions: np.ndarray
    weights: np.ndarray
    delay: int
    max_guidance: float = 5.0


@runtime_checkable
class ContinuesChunks(Protocol):
    """A low level whose chunk can be made to continue the one under way (steerable's flow policy:
    guided inpainting of the new chunk's start). Any other low level is blended over the overlap."""

    def act_continuing(self, observation: Observation, command: str, prefix: ChunkPrefix) -> ActionChunk:
        """Like `LowLevelController.act`, the chunk's first steps held close to `prefix`."""
        ...
