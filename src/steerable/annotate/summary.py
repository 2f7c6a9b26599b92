"""The run summary of `steerable annotate`: a typed object, serialised to JSON only at the edge.

It says which episodes were annotated, which failed and what each is missing (a failed module
costs only its own rows and those of the modules that need it), who produced each style, and
the run's notes grouped with the episodes they concern.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from steerable.dataset.summary import index_ranges

if TYPE_CHECKING:
    from steerable.annotate.engine import EpisodeResult
    from steerable.dataset.writer import WriteReport
    from steerable.vlm.protocol import VLMStats

__all__ = [
    "EpisodeFailure",
    "ModuleCounts",
    "RunSummary",
    "Timings",
    "WriteSummary",
    "group_notes",
    "episode_producers",
    "module_counts",
    "producers",
]


@dataclass
class EpisodeFailure:
    """An episode that is not fully annotated: the modules that failed (and why) and those written."""

    episode_index: int
    reason: str  # one line: "module: reason; module: reason"
    failed_modules: dict[str, str] = field(default_factory=dict)
    written_modules: list[str] = field(default_factory=list)  # their rows are in the dataset
    permanent: dict[str, str] = field(default_factory=dict)  # failed module -> why a re-run fails it again


@dataclass
class ModuleCounts:
    episodes: int = 0  # episodes with this module's rows
    failed: int = 0
    rows_by_style: dict[str, int] = field(default_factory=dict)


@dataclass
class WriteSummary:
    episodes: int = 0
    rows: int = 0
    frames: int = 0
    shards: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, report: WriteReport | None) -> WriteSummary:
        if report is None:
            return cls()
        return cls(len(report.episodes), report.rows, report.frames, [str(p) for p in report.shards])


@dataclass
class Timings:
    total_s: float = 0.0
    pipeline_s: float = 0.0
    validate_write_s: float = 0.0
    episode_mean_s: float = 0.0


@dataclass
class RunSummary:
    dataset: str
    output: str
    modules: list[str]
    episodes_selected: int
    episodes_annotated: int  # every module's rows written
    episodes_resumed: int  # every module of the episode taken from staging
    failures: list[EpisodeFailure]
    heuristic_subtasks: bool
    producers: dict[str, str]  # style -> model id, or heuristic:<module>
    notes: list[str]
    per_module: dict[str, ModuleCounts]
    written: WriteSummary
    vlm: VLMStats | None
    timings: Timings
    module_runs_resumed: int = 0  # (episode, module) outputs taken from staging, of episodes x modules
    # style -> the episodes whose rows of it a heuristic wrote (no model), e.g. subtasks without video
    heuristic_episodes: dict[str, list[int]] = field(default_factory=dict)
    summary_path: str | None = None
    push: dict[str, str] | None = None

    @property
    def complete(self) -> bool:
        """Every selected episode was annotated by every module."""
        return not self.failures

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["vlm"] = self.vlm.snapshot() if self.vlm is not None else {}
        return data


def producers(modules: Mapping[str, str | None], results: Sequence[EpisodeResult]) -> dict[str, str]:
    """style -> who wrote it: the model id for model modules, `heuristic:<module>` otherwise.

    `modules` maps each module that ran to its model id (None for a module without a model). A
    style written by two (the model's subtasks, motion's where an episode has no video) names both.
    """
    found: dict[str, set[str]] = {}
    for by_style in episode_producers(modules, results).values():
        for style, producer in by_style.items():
            found.setdefault(style, set()).update(producer.split(" + "))
    return {style: _joined(names) for style, names in sorted(found.items())}


def episode_producers(modules: Mapping[str, str | None], results: Sequence[EpisodeResult]) -> dict[int, dict[str, str]]:
    """episode -> style -> who wrote its rows there (as `producers`), for the episodes with rows: the
    provenance file records it per episode, so a heuristic's stand-in rows are told from a model's."""
    out: dict[int, dict[str, str]] = {}
    for r in results:
        found: dict[str, set[str]] = {}
        for name, staged in r.outputs.items():
            producer = modules.get(name) or f"heuristic:{name}"
            for row in staged.rows:
                found.setdefault(str(row.get("style") or "tool_call"), set()).add(producer)
        if found:
            out[r.episode_index] = {style: _joined(names) for style, names in sorted(found.items())}
    return out


def _joined(names: set[str]) -> str:
    return " + ".join(sorted(names, key=_model_first))


def _model_first(producer: str) -> tuple[bool, str]:
    return producer.startswith("heuristic:"), producer


def group_notes(run_notes: Sequence[str], episode_notes: Mapping[int, Sequence[str]]) -> list[str]:
    """Run notes, then each distinct episode note once: how often, in how many episodes and which."""
    episodes: dict[str, list[int]] = {}
    times: Counter[str] = Counter()
    for episode, notes in sorted(episode_notes.items()):
        times.update(notes)
        for note in dict.fromkeys(notes):
            episodes.setdefault(note, []).append(episode)
    grouped = []
    for note, eps in episodes.items():
        where = f"{len(eps)} episode{'s' if len(eps) > 1 else ''}: {index_ranges(eps)}"
        grouped.append(f"{note} ({times[note]} times in {where})" if times[note] > len(eps) else f"{note} ({where})")
    return list(run_notes) + grouped


def module_counts(names: Sequence[str], results: Sequence[EpisodeResult]) -> dict[str, ModuleCounts]:
    counts = {name: ModuleCounts() for name in names}
    for r in results:
        for name, staged in r.outputs.items():
            c = counts[name]
            c.episodes += 1
            styles = Counter(str(row.get("style") or "tool_call") for row in staged.rows)
            c.rows_by_style = dict(sorted((Counter(c.rows_by_style) + styles).items()))
        for name in r.failures:
            counts[name].failed += 1
    return counts
