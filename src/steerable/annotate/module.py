"""The contracts of an annotation module: its settings, its stage (what the engine knows before a run)
and the per-episode step it builds.

A module is one folder `annotate/modules/<name>/` holding a `ModuleSettings` subclass (its
`--<name>.*` flags), a `ModuleStage` subclass (inputs, dependencies, whether it needs a model, checks
against the dataset, how to build it) and the `AnnotationModule` that runs per episode. The registry
(`annotate/registry.py`) lists the stages; everything else iterates over it.

Light on purpose: `steerable annotate --help` imports this module, so heavy libraries (numpy, PIL,
pyarrow) are imported only where a module is built or run.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Literal, Protocol, TypeVar, runtime_checkable

from pydantic import ConfigDict

from steerable.settings import Settings

if TYPE_CHECKING:
    from steerable.annotate.context import EpisodeContext
    from steerable.dataset import LeRobotDataset
    from steerable.vlm.protocol import VLMClient

__all__ = [
    "AnnotationModule",
    "BuildContext",
    "Input",
    "ModuleCheck",
    "ModuleOutput",
    "ModuleSettings",
    "ModuleStage",
]

# What a module reads of an episode: camera frames, or the state/action vectors.
Input = Literal["video", "state"]

# A row check beyond the language schema: (all staged rows of the episode, facts) -> problems.
ModuleCheck = Callable[[list[dict[str, Any]], Mapping[str, Any]], list[str]]


class ModuleSettings(Settings):
    """The base of every module's settings section (`--<module>.*`): every module can be switched off."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = True


@dataclass
class ModuleOutput:
    """Rows a module produced for one episode, in staged form.

    Every row carries `timestamp`: for persistent styles its emission time, for event styles the
    stored timestamp of the frame it belongs on. `meta` holds small facts later modules may use
    (e.g. the effective task); `notes` are human-readable remarks for the run summary.

    An output is staged as done. A module whose every call failed therefore raises (with the
    reason) instead of returning no rows: it is then a failed module, redone on the next run.
    """

    rows: list[dict[str, Any]] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


@runtime_checkable
class AnnotationModule(Protocol):
    """One step of the per-episode pipeline (plan, interjections, vqa, motion)."""

    name: ClassVar[str]
    # Modules whose staged output this one reads (through `EpisodeContext.upstream`) when they run.
    requires: ClassVar[tuple[str, ...]]

    def fingerprint(self) -> dict[str, Any]:
        """Everything that changes this module's output: config, prompt texts, model id.

        Staging stores its hash; a re-run whose fingerprint matches skips the episode.
        """
        ...

    async def run(self, ctx: EpisodeContext) -> ModuleOutput: ...


@dataclass
class BuildContext:
    """What a stage may use to build its module for one run."""

    vlm: VLMClient | None
    running: frozenset[str]  # every module this run builds (to adapt to an absent neighbour)
    notes: list[str] = field(default_factory=list)  # run-level remarks for the summary


S = TypeVar("S", bound=ModuleSettings)


class ModuleStage(Generic[S]):
    """What the engine knows about one module before it runs anything.

    Subclasses set the class attributes and implement `build`; `check` and `row_check` are optional.
    """

    name: ClassVar[str]
    settings_type: ClassVar[type[ModuleSettings]]
    inputs: ClassVar[frozenset[Input]] = frozenset()
    needs_model: ClassVar[bool] = True  # a run without a VLM skips the module (with a note)
    # The styles the module writes (None: tool-call rows such as `say`). Where it succeeds, a run
    # replaces the episode's stored rows of these styles (and of any style it produced) and keeps
    # every other style's rows: a motion-only run leaves plans and speech alone.
    styles: ClassVar[frozenset[str | None]] = frozenset()

    def __init__(self, settings: S) -> None:
        self.settings = settings

    def needs_modules(self) -> dict[str, str]:
        """Modules that must be enabled too for these settings -> the flag that needs each one.

        Checked before anything runs. (`AnnotationModule.requires` is softer: what the module reads
        when those modules run.)
        """
        return {}

    def replaces(self, running: Collection[str]) -> frozenset[str | None]:
        """The stored styles this module's output replaces when the `running` modules run."""
        return self.styles

    def check(self, dataset: LeRobotDataset, *, camera: str | None) -> None:
        """Raise ConfigError for a setting this dataset cannot satisfy; runs before the first call.

        `camera` is the run's default camera (None when the dataset has none).
        """

    def build(self, ctx: BuildContext) -> AnnotationModule:
        raise NotImplementedError(f"{type(self).__name__}.build")

    def row_check(self, running: Collection[str]) -> ModuleCheck | None:
        """A check of the episode's staged rows before anything is written, or None."""
        return None
