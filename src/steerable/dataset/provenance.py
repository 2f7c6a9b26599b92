"""Who wrote each language style: `meta/steerable_provenance.json`, steerable's own file under `meta/`.

The file is the one place steerable writes its provenance: LeRobot's reader warns about every key of
`meta/info.json` its `DatasetInfo` does not know, and drops them whenever it rewrites info.json, but
it leaves unknown files under `meta/` alone where it keeps the dataset folder (modify_tasks,
reencode_videos). A dataset LeRobot wrote anew (delete_episodes, split, merge, remove_feature) has no
file, and `steerable restore` copies it back from the source dataset.

Older steerable versions wrote the block into info.json under `PROVENANCE_KEY` (most of them also
into the file). That key is still read, and it wins over the file: every write of this version moves
the block into the file and drops the key in the same commit, so a key that is still there was
written after the file by an older version (the newest write wins; when both came from one write
they hold the same block).

The block: `producers` (style -> model id or `heuristic:<module>`, the dataset-level summary: the
latest writer of a style names it), `episodes` (style -> producer -> episode ranges as text,
"0-2,5": who wrote that style of each episode), and a person's records (`steerable.dataset.review`).
Rows are *heuristic* where their episode's producer of the style is a heuristic only and no person
edited that style of the episode since.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, TypedDict, cast

from steerable.dataset.atomic import atomic_write_bytes
from steerable.dataset.info import DatasetInfo
from steerable.dataset.layout import PROVENANCE_KEY, PROVENANCE_PATH
from steerable.dataset.ranges import index_ranges

__all__ = [
    "EPISODES",
    "HEURISTIC_PREFIX",
    "TOOL_CALL_STYLE",
    "Provenance",
    "ProvenanceBlock",
    "MEASURED_STYLES",
    "is_heuristic",
    "provenance_block",
    "read_provenance",
    "read_provenance_file",
    "recorded_producers",
    "with_episode_producers",
    "write_provenance_file",
]

EPISODES: Final = "episodes"
HEURISTIC_PREFIX = "heuristic:"
# Styles that only a rule over the recorded motion writes (the motion module's primitives): measured,
# not a model's text replaced by a guess, so a fine-tuning export keeps them.
MEASURED_STYLES: frozenset[str] = frozenset({"motion"})
# The style name of style-less tool-call rows (`say`), as `steerable info` counts them.
TOOL_CALL_STYLE = "tool_call"


class ProvenanceBlock(TypedDict, total=False):
    """The provenance block, as steerable writes it (the keys this module's docstring describes).

    Read back, it is the JSON object the file holds: an older version or another tool may have left a
    part out, in another shape, or keys of its own (kept as they are). Every reader checks the shape
    of the part it uses and skips what is malformed.
    """

    producers: dict[str, str]  # style -> producer
    episodes: dict[str, dict[str, str]]  # style -> producer -> episode ranges ("0-2,5")
    human: dict[str, list[int]]  # style -> episodes a person edited (`steerable.dataset.review_records`)
    review: dict[str, str]  # "<episode>" -> review status


def provenance_block(root: Path, info: DatasetInfo) -> ProvenanceBlock | None:
    """The provenance block of the dataset at `root`: an older steerable's key in its info.json
    (`info`), else the file's; None when neither holds one."""
    block = (info.model_extra or {}).get(PROVENANCE_KEY)
    return cast(ProvenanceBlock, block) if isinstance(block, dict) else read_provenance_file(root)


def read_provenance_file(root: Path) -> ProvenanceBlock | None:
    """The block of `meta/steerable_provenance.json`; None when it is absent or not a JSON object."""
    try:
        block = json.loads((Path(root) / PROVENANCE_PATH).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return cast(ProvenanceBlock, block) if isinstance(block, dict) else None


def recorded_producers(root: Path, info: DatasetInfo) -> dict[str, str]:
    """style -> model id or `heuristic:<module>`, sorted by style; empty when nothing is recorded."""
    block = provenance_block(root, info)
    producers = block.get("producers") if block is not None else None
    if not isinstance(producers, dict):
        return {}
    return {str(k): str(v) for k, v in sorted(producers.items())}


def write_provenance_file(path: Path, block: ProvenanceBlock, *, durable: bool = True) -> None:
    """Write the block as the file at `path` (deterministic bytes: same block, same file)."""
    text = json.dumps(dict(block), indent=2, sort_keys=True) + "\n"
    atomic_write_bytes(Path(path), text.encode("utf-8"), durable=durable)


def is_heuristic(producer: str | None) -> bool:
    """Whether a producer is steerable's heuristics only (`heuristic:motion`; not `model + heuristic:motion`)."""
    if not producer:
        return False
    return all(part.strip().startswith(HEURISTIC_PREFIX) for part in producer.split(" + "))


def _style_key(style: str | None) -> str:
    return TOOL_CALL_STYLE if style is None else str(style)


# -- per-episode records ------------------------------------------------------------------------------


def _episode_table(block: ProvenanceBlock) -> dict[str, dict[str, set[int]]]:
    """The block's `episodes` record as style -> producer -> episodes (malformed parts are skipped)."""
    raw = block.get(EPISODES)
    table: dict[str, dict[str, set[int]]] = {}
    if not isinstance(raw, dict):
        return table
    for style, by_producer in raw.items():
        if not isinstance(by_producer, dict):
            continue
        for producer, ranges in by_producer.items():
            episodes = {e for a, b in _ranges_of(ranges) for e in range(a, b + 1)}
            table.setdefault(str(style), {})[str(producer)] = episodes
    return table


def _ranges_of(raw: object) -> list[tuple[int, int]]:
    """The (first, last) runs of a ranges text such as "0-2,5" (malformed parts are skipped)."""
    out = []
    for part in raw.split(",") if isinstance(raw, str) else ():
        first, _, last = part.strip().partition("-")
        if first.isdigit() and (last or first).isdigit() and int(first) <= int(last or first):
            out.append((int(first), int(last or first)))
    return out


def with_episode_producers(
    block: ProvenanceBlock,
    written: Mapping[int, Mapping[str, str]],
    rewritten: Mapping[int, Iterable[str | None] | None],
) -> ProvenanceBlock:
    """`block` once a write stored these episodes: `written` (episode -> style -> producer of its new
    rows) replaces their records of those styles, and `rewritten` (episode -> the styles the write
    replaced, None: all; a None style: tool-call rows) drops their records of styles left without rows."""
    table = _episode_table(block)
    for ep in set(written) | set(rewritten):
        styles = rewritten.get(ep, ())
        gone = set(table) if styles is None else {_style_key(s) for s in styles}
        for style in gone | set(written.get(ep, {})):
            for episodes in table.get(style, {}).values():
                episodes.discard(ep)
        for style, producer in written.get(ep, {}).items():
            table.setdefault(style, {}).setdefault(producer, set()).add(ep)
    record = {
        style: {producer: index_ranges(eps, sep=",") for producer, eps in sorted(by.items()) if eps}
        for style, by in sorted(table.items())
    }
    out = block.copy()
    out.pop(EPISODES, None)
    record = {style: by for style, by in record.items() if by}
    if record:
        out[EPISODES] = record
    return out


@dataclass(frozen=True)
class Provenance:
    """A provenance block read once for per-episode questions (the viewer, `export`, `render`).

    Episodes a per-episode record does not name (rows written before steerable recorded them) fall
    back to the dataset-level producer of the style.
    """

    producers: dict[str, str] = field(default_factory=dict)
    # style -> sorted (first, last, producer) runs
    runs: dict[str, list[tuple[int, int, str]]] = field(default_factory=dict)
    human: dict[str, frozenset[int]] = field(default_factory=dict)

    @classmethod
    def of(cls, block: ProvenanceBlock | None) -> Provenance:
        block = block or ProvenanceBlock()
        producers = block.get("producers")
        runs: dict[str, list[tuple[int, int, str]]] = {}
        raw = block.get(EPISODES)
        for style, by_producer in (raw.items() if isinstance(raw, dict) else ()):
            if isinstance(by_producer, dict):
                runs[str(style)] = sorted(
                    (a, b, str(producer)) for producer, ranges in by_producer.items() for a, b in _ranges_of(ranges)
                )
        human = block.get("human")  # `steerable.dataset.review`'s record: style -> episodes a person edited
        return cls(
            producers={str(k): str(v) for k, v in producers.items()} if isinstance(producers, dict) else {},
            runs=runs,
            human={
                str(s): frozenset(int(e) for e in eps if isinstance(e, int))
                for s, eps in (human.items() if isinstance(human, dict) else ())
                if isinstance(eps, list)
            },
        )

    def producer(self, style: str, episode: int) -> str | None:
        """Who wrote `style` in `episode`: its per-episode record, else the dataset-level producer."""
        runs = self.runs.get(style, [])
        # The runs of a style do not overlap (a write takes the episode out of every run first).
        i = bisect.bisect_right(runs, episode, key=lambda run: run[0])
        if i and runs[i - 1][1] >= episode:
            return runs[i - 1][2]
        return self.producers.get(style)

    def episode_producers(self, episode: int) -> dict[str, str]:
        """style -> who wrote it in `episode`, for every style with a record (sorted by style)."""
        styles = sorted(set(self.producers) | set(self.runs))
        found = {style: self.producer(style, episode) for style in styles}
        return {style: who for style, who in found.items() if who is not None}

    def heuristic_styles(self, episode: int) -> frozenset[str]:
        """The styles whose rows in `episode` are a heuristic's: not a model's, and not edited by a person."""
        return frozenset(
            style for style, who in self.episode_producers(episode).items()
            if is_heuristic(who) and episode not in self.human.get(style, frozenset())
        )

    def stand_in_styles(self, episode: int) -> frozenset[str]:
        """The heuristic styles of `episode` that stand in for a model's text (what `export` leaves out by
        default): every heuristic style but those a rule writes by design (`MEASURED_STYLES`)."""
        return self.heuristic_styles(episode) - MEASURED_STYLES


def read_provenance(root: Path, info: DatasetInfo) -> Provenance:
    """The dataset's provenance, parsed for per-episode questions (empty when nothing is recorded)."""
    return Provenance.of(provenance_block(root, info))
