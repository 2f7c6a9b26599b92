"""What a dataset made by LeRobot's dataset tools lost of steerable's metadata, and getting it back.

LeRobot's `lerobot-edit-dataset` keeps the language columns (they are data columns) but not all of
steerable's metadata. LeRobot 0.6.1:

| operation | tool catalogue | provenance and review records | ground truth file | revisions |
|---|---|---|---|---|
| delete_episodes, split, merge, remove_feature (a new dataset) | dropped | dropped | dropped | not copied |
| modify_tasks, reencode_videos (the same folder, or a copy of it) | kept | kept | kept | kept |

(The tool catalogue is info.json's `tools`; the records are `meta/steerable_provenance.json`; the
ground truth is `meta/steerable_ground_truth.json`; revisions are `.steerable/`.)

(An older steerable's provenance key in info.json is dropped by every operation; its file copy stays
where the folder does.) What is left to restore comes from the dataset it was made from:
`match_episodes` finds each episode there by its frames (LeRobot renumbers episodes), and
`restore_info` writes the catalogue (through `DatasetInfo`) and provenance back, the review records
(`steerable.dataset.review_records`) and the per-episode producers under the new episode indices. The
tool catalogue can also be derived: steerable's default one covers every `say` call. Revisions are not
restored: they are the history of the source's files, which the source keeps.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa

from steerable.dataset.info import load_info, write_info
from steerable.dataset.layout import GROUND_TRUTH_PATH, PROVENANCE_PATH
from steerable.dataset.lerobot import LeRobotDataset
from steerable.dataset.provenance import (
    EPISODES,
    Provenance,
    ProvenanceBlock,
    provenance_block,
    with_episode_producers,
    write_provenance_file,
)
from steerable.dataset.ranges import index_ranges
from steerable.dataset.review import episode_rows, rows_fingerprint
from steerable.dataset.review_records import block_human, block_review, with_records
from steerable.language.rows import EventRow, PersistentRow
from steerable.language.tools import DEFAULT_TOOLS, merge_tools, tool_name

__all__ = [
    "EpisodeMatch",
    "MetadataRestored",
    "PROVENANCE",
    "TOOL_CATALOGUE",
    "match_episodes",
    "missing_metadata",
    "missing_notice",
    "no_ground_truth",
    "restore_info",
]

TOOL_CATALOGUE = 'tool catalogue (info.json "tools")'
PROVENANCE = f"provenance ({PROVENANCE_PATH})"  # the whole block: producers and review records
# Columns LeRobot renumbers when it writes a new dataset; every other numeric column is the frames'.
_RENUMBERED = frozenset({"episode_index", "index", "task_index"})
_NUMERIC = ("float", "int", "uint", "bool")


def missing_metadata(ds: LeRobotDataset, styles: Iterable[str] = ()) -> list[str]:
    """What of steerable's metadata a dataset with language rows lacks, as short phrases.

    `styles`: the styles its rows hold (from `steerable.dataset.summary`), to name the ones whose
    producer is not recorded; without them, only a wholly missing provenance is reported.
    """
    if not ds.has_language:
        return []
    missing = []
    if ds.info.tools is None:
        missing.append(TOOL_CATALOGUE)
    block = provenance_block(ds.root, ds.info)
    producers = block.get("producers") if block is not None else None
    known = set(producers) if isinstance(producers, dict) else set()
    unrecorded = sorted(set(styles) - known)
    if block is None:
        missing.append(PROVENANCE)
    elif unrecorded:
        missing.append(f"provenance of {', '.join(unrecorded)} ({PROVENANCE_PATH})")
    return missing


def missing_notice(root: str | Path, missing: Sequence[str]) -> str | None:
    """One line: what the dataset at `root` lacks, why it usually does, and the command that restores it."""
    if not missing:
        return None
    what = f"{root} lacks {' and '.join(missing)}, which LeRobot's dataset tools drop"
    if list(missing) == [TOOL_CATALOGUE]:
        return f"{what}: `steerable restore {root}` derives it (steerable's default catalogue)"
    them = "it" if len(missing) == 1 else "them"
    return f"{what}: `steerable restore {root} --from SOURCE` copies {them} back from the dataset it was made from"


def no_ground_truth(root: str | Path, *, otherwise: str = "") -> str:
    """The one-line error for a dataset without `meta/steerable_ground_truth.json` where one is needed;
    `otherwise` names another way out (`pass --gold FILE_OR_DATASET`)."""
    restore = (
        f"if LeRobot's dataset tools made it from a synthetic dataset (they do not copy that file), "
        f"`steerable restore {root} --from SOURCE` copies it back"
    )
    return f"{root} has no ground truth ({GROUND_TRUTH_PATH}): {otherwise + ', or, ' if otherwise else ''}{restore}"


@dataclass
class EpisodeMatch:
    """Each target episode found in a source: target episode index -> (source number, its episode index)."""

    found: dict[int, tuple[int, int]] = field(default_factory=dict)
    unmatched: list[int] = field(default_factory=list)

    def from_source(self, source: int) -> dict[int, int]:
        """target episode -> source episode, for the episodes found in source number `source`."""
        return {t: e for t, (s, e) in self.found.items() if s == source}


def match_episodes(target: LeRobotDataset, sources: Sequence[LeRobotDataset]) -> EpisodeMatch:
    """Find each episode of `target` among the episodes of `sources` by the frames it holds.

    The fingerprint is the episode's length and the bytes of every numeric column the two datasets
    share except the ones LeRobot renumbers (episode, index, task): timestamps, state, actions.
    An episode found twice keeps the first source (in the order given).
    """
    pool: dict[bytes, list[tuple[int, int]]] = {}
    column_sets: dict[tuple[str, ...], None] = {}  # each distinct set once, in source order
    for number, source in enumerate(sources):
        shared = _shared_columns(target, source)
        column_sets[shared] = None
        for ep in source.episodes:
            pool.setdefault(_fingerprint(source, ep.episode_index, shared), []).append((number, ep.episode_index))
    match = EpisodeMatch()
    for ep in target.episodes:
        for shared in column_sets:
            hits = pool.get(_fingerprint(target, ep.episode_index, shared))
            if hits:
                match.found[ep.episode_index] = hits.pop(0)
                break
        else:
            match.unmatched.append(ep.episode_index)
    return match


def _shared_columns(a: LeRobotDataset, b: LeRobotDataset) -> tuple[str, ...]:
    def numeric(ds: LeRobotDataset) -> set[str]:
        return {k for k, f in ds.features.items() if str(f.get("dtype", "")).startswith(_NUMERIC)}

    return tuple(sorted((numeric(a) & numeric(b)) - _RENUMBERED))


def _fingerprint(ds: LeRobotDataset, episode_index: int, columns: tuple[str, ...]) -> bytes:
    digest = hashlib.blake2b(str(ds.episode(episode_index).length).encode(), digest_size=16)
    if columns:
        table = ds.read_episode(episode_index, list(columns))
        for name in columns:
            digest.update(name.encode())
            digest.update(_values(table.column(name)).tobytes())
    return digest.digest()


def _values(column: pa.ChunkedArray) -> np.ndarray:
    """A column's numbers as float64, whatever list type LeRobot or steerable stored them with."""
    array = column.combine_chunks()
    while pa.types.is_list(array.type) or pa.types.is_fixed_size_list(array.type) or pa.types.is_large_list(array.type):
        array = array.flatten()
    return np.asarray(array.to_numpy(zero_copy_only=False), dtype=np.float64)


@dataclass
class MetadataRestored:
    """What `restore_info` wrote (empty strings: nothing to do, or nothing to restore from).

    `reviews`: the review records carried over; `review_differs`: target episodes whose source has
    review records but whose language is no longer the source episode's (their records stay behind).
    """

    tools: str = ""
    provenance: str = ""
    reviews: str = ""
    review_differs: list[int] = field(default_factory=list)


def restore_info(target: LeRobotDataset, sources: Sequence[LeRobotDataset], match: EpisodeMatch) -> MetadataRestored:
    """Write the tool catalogue, the provenance and the review records back into `target` from the
    sources its episodes came from; without a source (or when none declares one), the catalogue is
    derived: steerable's default one. What `target` already records wins over what a source says."""
    used = [s for i, s in enumerate(sources) if match.from_source(i)]
    read = load_info(target.root)
    info = read.without_legacy_provenance()  # an older steerable's key: moved to the file
    done = MetadataRestored()
    if target.has_language or any(s.info.tools for s in used):
        declared = [t for s in used for t in s.info.tools or ()]
        tools = merge_tools(read.tools, declared or DEFAULT_TOOLS)
        if tools != read.tools:
            names = ", ".join(str(tool_name(t)) for t in tools)
            done.tools = f"{names} from {_names(used)}" if declared else f"{names} (derived: steerable's default)"
            info.tools = tools
    blocks = [b for b in (provenance_block(s.root, s.info) for s in used) if b is not None]
    rewrite = bool(done.tools)
    legacy = read.has_legacy_provenance
    mine = provenance_block(target.root, target.info) or ProvenanceBlock()
    block = mine
    if blocks:
        human, review, done.review_differs = _carried_reviews(target, sources, match, mine)
        carried = with_episode_producers(mine, _carried_producers(sources, match, mine), {})
        block = with_records(_merged(blocks, carried), human, review)
        if with_records(block, {}, {}) != with_records(mine, {}, {}):
            done.provenance = f"{', '.join(sorted(block.get('producers', {})))} from {_names(used)}"
        if (human, review) != (block_human(mine), block_review(mine)):
            done.reviews = _describe_reviews(human, review, used)
    if block and (block != mine or legacy):
        write_provenance_file(target.root / PROVENANCE_PATH, block)
    if rewrite or legacy:
        write_info(target.root, info)
        target.info = info
    return done


def _runs_only(block: ProvenanceBlock | None) -> Provenance:
    """The per-episode records of `block` alone: no fallback to its dataset-level producers."""
    episodes = (block or ProvenanceBlock()).get(EPISODES)
    return Provenance.of(ProvenanceBlock() if episodes is None else ProvenanceBlock(episodes=episodes))


def _carried_producers(
    sources: Sequence[LeRobotDataset], match: EpisodeMatch, mine: ProvenanceBlock
) -> dict[int, dict[str, str]]:
    """target episode -> style -> producer, from the per-episode records of the source episode it
    came from, for the styles the target does not record for that episode itself."""
    own = _runs_only(mine)
    out: dict[int, dict[str, str]] = {}
    for number, source in enumerate(sources):
        theirs = _runs_only(provenance_block(source.root, source.info))
        for t, e in sorted(match.from_source(number).items()):
            recorded = own.episode_producers(t)
            found = {s: who for s, who in theirs.episode_producers(e).items() if s not in recorded}
            if found:
                out[t] = found
    return out


def _merged(blocks: Sequence[ProvenanceBlock], mine: ProvenanceBlock) -> ProvenanceBlock:
    """`mine` with the sources' producers added (its own win; a style two sources name different
    producers for keeps both). Only `producers` is taken from a source here: the review records
    name episodes by index, which LeRobot renumbered (`_carried_reviews` maps them)."""
    producers: dict[str, str] = {}
    for block in blocks:
        for style, who in (block.get("producers") or {}).items():
            seen = producers.get(style)
            producers[style] = who if seen is None or seen == who else f"{seen} | {who}"
    producers.update(mine.get("producers") or {})
    out = mine.copy()
    out["producers"] = dict(sorted(producers.items()))
    return out


def _carried_reviews(
    target: LeRobotDataset, sources: Sequence[LeRobotDataset], match: EpisodeMatch, mine: ProvenanceBlock
) -> tuple[dict[str, list[int]], dict[int, str], list[int]]:
    """The target's review records with the sources' added under the target's episode indices: the
    `human` marks (style -> episodes) and the `review` status per episode, and the target episodes
    whose source episode has records but other language rows (a record speaks of the rows a person
    saw: those stay behind). What the target records itself wins."""
    human = {style: set(eps) for style, eps in block_human(mine).items()}
    review = block_review(mine)
    differs = []
    for number, source in enumerate(sources):
        block = provenance_block(source.root, source.info) or ProvenanceBlock()
        theirs, statuses = block_human(block), block_review(block)
        for t, e in sorted(match.from_source(number).items()):
            marks = [style for style, eps in theirs.items() if e in eps]
            if not marks and e not in statuses:
                continue
            if rows_fingerprint(*_rows(target, t)) != rows_fingerprint(*_rows(source, e)):
                differs.append(t)
                continue
            for style in marks:
                human.setdefault(style, set()).add(t)
            if e in statuses:
                review.setdefault(t, statuses[e])
    return {s: sorted(eps) for s, eps in sorted(human.items())}, dict(sorted(review.items())), sorted(differs)


def _rows(ds: LeRobotDataset, episode_index: int) -> tuple[list[PersistentRow], list[tuple[float, EventRow]]]:
    rows = episode_rows(ds, episode_index)
    return rows.persistent, rows.events


def _describe_reviews(
    human: Mapping[str, list[int]], review: Mapping[int, str], sources: Sequence[LeRobotDataset]
) -> str:
    parts = [f"{status} episode(s) {index_ranges([e for e, s in review.items() if s == status])}"
             for status in sorted(set(review.values()))]
    parts += [f"human {style} episode(s) {index_ranges(eps)}" for style, eps in human.items()]
    return f"{'; '.join(parts)} from {_names(sources)}"


def _names(sources: Sequence[LeRobotDataset]) -> str:
    return ", ".join(str(s.root) for s in sources)
