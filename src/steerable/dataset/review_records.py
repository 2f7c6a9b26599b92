"""A person's records in the provenance block: which rows a person edited, and each episode's review status.

`"human": {style: [episode, ...]}` names, per style, the episodes whose rows of that style a person
edited (style-less tool-call rows such as `say` count as "tool_call"); `"review": {"<episode>":
"reviewed" | "needs work"}` is the status set per episode (absent: unreviewed). These are pure
functions of a block: the review save (`steerable.dataset.review`) adds marks, a language write
(`steerable.dataset.writer`) takes them off the rows it rewrote, and `restore` carries them over
(`steerable.dataset.lineage`), each below the modules that write files.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final, Literal, get_args

from steerable.dataset.provenance import TOOL_CALL_STYLE, ProvenanceBlock
from steerable.errors import ConfigError

__all__ = [
    "HUMAN",
    "REVIEWED",
    "REVIEW_STATUSES",
    "UNREVIEWED",
    "ReviewStatus",
    "checked_review_status",
    "block_human",
    "block_review",
    "with_records",
    "with_review",
    "without_person",
]

HUMAN: Final = "human"
REVIEW: Final = "review"
# The statuses a person gives an episode, the first being the default; the viewer's save bodies use the type.
ReviewStatus = Literal["unreviewed", "reviewed", "needs work"]
REVIEW_STATUSES: tuple[ReviewStatus, ...] = get_args(ReviewStatus)
UNREVIEWED: Final[ReviewStatus] = REVIEW_STATUSES[0]  # the default: an episode the block does not list
REVIEWED: Final[ReviewStatus] = REVIEW_STATUSES[1]
_BY_NAME: Final[dict[object, ReviewStatus]] = {s: s for s in REVIEW_STATUSES}


def checked_review_status(value: object) -> ReviewStatus:
    """`value` as a review status: the check at the library's boundary (ConfigError naming the statuses)."""
    status = _BY_NAME.get(value) if isinstance(value, str) else None
    if status is None:
        raise ConfigError(f"review status {value!r} is not one of {', '.join(REVIEW_STATUSES)}")
    return status


def block_human(block: ProvenanceBlock) -> dict[str, list[int]]:
    """The `human` record of a provenance block: style -> episodes."""
    raw = block.get(HUMAN)
    if not isinstance(raw, dict):
        return {}
    return {str(s): sorted(int(e) for e in eps) for s, eps in sorted(raw.items()) if isinstance(eps, list)}


def block_review(block: ProvenanceBlock) -> dict[int, ReviewStatus]:
    """The `review` record of a provenance block: episode -> status (never UNREVIEWED: that one is not listed)."""
    raw = block.get(REVIEW)
    if not isinstance(raw, dict):
        return {}
    out = {int(e): _BY_NAME.get(s) if isinstance(s, str) else None for e, s in raw.items() if str(e).isdigit()}
    return {e: s for e, s in out.items() if s is not None and s != UNREVIEWED}


def with_records(
    block: ProvenanceBlock, human: Mapping[str, Iterable[int]], review: Mapping[int, str]
) -> ProvenanceBlock:
    """`block` with these `human` and `review` records in place of its own (empty ones left out)."""
    out = block.copy()
    out.pop(HUMAN, None)
    out.pop(REVIEW, None)
    marks = {style: sorted(set(eps)) for style, eps in sorted(human.items()) if eps}
    if marks:
        out[HUMAN] = marks
    if review:
        out[REVIEW] = {str(e): review[e] for e in sorted(review)}
    return out


def with_review(
    block: ProvenanceBlock, episode: int, styles: Iterable[str], status: ReviewStatus | None
) -> ProvenanceBlock:
    """`block` once a person saved `episode`: the `styles` they changed marked theirs, and the review
    `status` set (None: left as it was; "unreviewed": the episode's status removed)."""
    human = block_human(block)
    for style in styles:
        human[style] = sorted(set(human.get(style, [])) | {episode})
    review = block_review(block)
    if status == UNREVIEWED:
        review.pop(episode, None)
    elif status is not None:
        review[episode] = status
    return with_records(block, human, review)


def without_person(
    block: ProvenanceBlock, rewritten: Mapping[int, Iterable[str | None] | None]
) -> ProvenanceBlock:
    """`block` once a model or heuristic rewrote these rows: episode -> the styles rewritten (None: all of
    its language; a None style: tool-call rows). Their `human` marks go, and so does the episode's review
    status: the rows a person looked at are not there any more, so the episode is unreviewed again."""
    human = block_human(block)
    for ep, styles in rewritten.items():
        keys = set(human) if styles is None else {TOOL_CALL_STYLE if s is None else str(s) for s in styles}
        for style in keys & set(human):
            human[style] = [e for e in human[style] if e != ep]
    review = {e: s for e, s in block_review(block).items() if e not in rewritten}
    return with_records(block, human, review)
