"""`steerable restore DATASET --from SOURCE`: give a dataset that LeRobot's dataset tools wrote
(`lerobot-edit-dataset` delete_episodes, split, merge, ...) back the steerable metadata they drop:
the tool catalogue, the provenance with the review records and, for synthetic data, the ground truth."""

from __future__ import annotations

import argparse
from typing import ClassVar

from pydantic import Field

from steerable.errors import DatasetError
from steerable.settings import Settings

__all__ = ["RestoreSettings", "register"]

DESCRIPTION = (
    "LeRobot's dataset tools keep the language columns but drop steerable's metadata: the tool catalogue "
    "and provenance (with the review records of `steerable view --edit`) in meta/info.json and "
    "meta/steerable_ground_truth.json. This finds each episode of DATASET in the source dataset(s) by its "
    "frames (LeRobot renumbers episodes) and writes them back under the new episode indices. "
    "Without --from, only the tool catalogue is restored (derived: steerable's default)."
)
USAGE = f"""usage: steerable restore DATASET [--from SOURCE ...]

{DESCRIPTION}

Every option, with its default:
"""


class RestoreSettings(Settings):
    """`steerable restore`: the dataset to restore, and where its episodes came from."""

    positional: ClassVar[tuple[str, ...]] = ("dataset",)
    doc: ClassVar[str | None] = "docs/lerobot.md"

    dataset: str = Field(description="the local dataset to restore (written in place)")
    sources: list[str] = Field([], alias="from", json_schema_extra={"repeat": True},
                               description="a dataset its episodes came from (repeat for the inputs of a merge)")


def register(sub: argparse._SubParsersAction) -> None:
    from steerable.cli.flags import add_command

    add_command(sub, "restore", help="restore steerable metadata that LeRobot's dataset tools dropped", func=run)


def run(args: argparse.Namespace) -> int:
    from steerable.cli.flags import parse_command

    cfg = parse_command(RestoreSettings, args, USAGE)
    return 0 if cfg is None else _restore(cfg)


def _restore(args: RestoreSettings) -> int:
    from steerable.dataset import LeRobotDataset, open_dataset
    from steerable.dataset.layout import GROUND_TRUTH_PATH
    from steerable.dataset.lineage import match_episodes, missing_metadata, missing_notice, restore_info
    from steerable.dataset.summary import index_ranges
    from steerable.synthetic.ground_truth import carry_ground_truth

    target = LeRobotDataset(args.dataset)
    sources = [open_dataset(s) for s in args.sources]
    match = match_episodes(target, sources)
    if sources:
        if not match.found:
            raise DatasetError(
                f"no episode of {target.root} has the frames of an episode of {', '.join(args.sources)}: "
                "pass the dataset(s) it was made from"
            )
        counts = ", ".join(f"{len(match.from_source(i))} from {s.root}" for i, s in enumerate(sources))
        print(f"matched {len(match.found)} of {len(target.episodes)} episodes: {counts}")
        if match.unmatched:
            print(f"warning: episode(s) {index_ranges(match.unmatched)} match no episode of the sources: "
                  "their ground truth stays missing")
    done = restore_info(target, sources, match)
    if done.tools:
        print(f"tool catalogue: {done.tools}")
    if done.provenance:
        print(f"provenance: {done.provenance}")
    if done.reviews:
        print(f"review records: {done.reviews}")
    if done.review_differs:
        print(f"warning: episode(s) {index_ranges(done.review_differs)}: the language rows differ from the "
              "source episode's, so its review records are not carried over")
    if (target.root / GROUND_TRUTH_PATH).is_file():
        truth = 0
        if sources:
            print(f"ground truth: {GROUND_TRUTH_PATH} is present, kept")
    else:
        pieces = [(s.root, match.from_source(i)) for i, s in enumerate(sources)]
        truth = carry_ground_truth(target.root, target.camera_keys, pieces)
        if truth:
            print(f"ground truth: {truth} episode(s) from {', '.join(str(root) for root, m in pieces if m)}")
    left = missing_metadata(target)
    if left:
        print(f"note: {missing_notice(target.root, left)}")
    elif not (done.tools or done.provenance or done.reviews or truth):
        print(f"{target.root}: nothing to restore")
    return 0
