"""What `steerable train` checks before its first step, each failure one line saying what to pass or do.

The dataset holds what the policy reads: its state and action features and, for every episode the
run trains or holds out, a video file of every camera (a missing file used to fail after a minute
of training, when the episode was first drawn). And the recipe has something to teach there: a
recipe with text targets must render at least one sample with a target (on a dataset without
language rows it renders none, and the run would "succeed" with every loss zero); a recipe without
targets must render at least one sample that trains actions.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from steerable.dataset import LeRobotDataset
from steerable.dataset.frames import float_vectors
from steerable.dataset.summary import index_ranges
from steerable.errors import ConfigError, DatasetError, VideoNotFoundError
from steerable.policy.config import PolicyConfig
from steerable.policy.data import PolicyDataset
from steerable.recipes import Recipe

__all__ = ["check_dataset", "check_language", "check_recipe", "missing_videos", "teaches_text"]


def check_dataset(dataset: LeRobotDataset, cfg: PolicyConfig, episodes: Sequence[int], *, resumed: bool) -> None:
    """The features `cfg` reads exist in `dataset`, and every camera has a video of each of `episodes`.
    `resumed`: `cfg` is a checkpoint's (its features and episodes cannot be changed by a flag)."""
    for role, keys in (("state", cfg.state_keys), ("action", [cfg.action_key])):
        for key in keys:
            if key not in dataset.features:
                fix = ("resume with the dataset it was trained on, or start a new --output_dir" if resumed
                       else f"pass --policy.{role}_key NAME")
                raise ConfigError(f"{dataset.root} has no {role} feature {key!r}, which the policy reads (its float "
                                  f"vectors: {float_vectors(dataset.features) or 'none'}): {fix}")
    for camera, missing in missing_videos(dataset, cfg.cameras, episodes).items():
        kept = sorted(set(episodes) - set(missing))
        fix = ("restore the video files, or start a new --output_dir" if resumed
               else f"leave them out with --episodes {index_ranges(kept).replace(', ', ',')}" if kept
               else "restore the video files")
        raise DatasetError(f"{dataset.root}: camera {camera!r} has no video file for episode(s) "
                           f"{index_ranges(missing)} (`steerable info` lists them): {fix}, or train without "
                           "cameras (--policy.cameras none)")


def missing_videos(dataset: LeRobotDataset, cameras: Sequence[str], episodes: Sequence[int]) -> dict[str, list[int]]:
    """Per camera with any, the `episodes` whose video file is absent (or not in the episode metadata)."""
    wanted = set(episodes)
    found: dict[str, list[int]] = {}
    present: dict[Path, bool] = {}  # path -> exists: episodes share files
    for camera in cameras:
        for ep in dataset.episodes:
            if ep.episode_index not in wanted:
                continue
            try:
                path = dataset.video_path(camera, ep)
            except VideoNotFoundError:
                found.setdefault(camera, []).append(ep.episode_index)
                continue
            if path not in present:
                present[path] = path.is_file()
            if not present[path]:
                found.setdefault(camera, []).append(ep.episode_index)
    return found


def teaches_text(recipe: Recipe) -> bool:
    """Whether any turn of `recipe` is a target (text the policy learns to write)."""
    return any(turn.target for _, component in recipe.components() for turn in component.messages or ())


def check_language(dataset: LeRobotDataset, recipe: Recipe, name: str) -> None:
    """A recipe with text targets (`recipe`, called `name`) has language rows to read them from."""
    if teaches_text(recipe) and not dataset.has_language:
        raise ConfigError(f"{dataset.root} has no language rows for recipe {name!r} (it teaches text from them): "
                          "annotate it first (`steerable annotate`), or pass a --recipe that needs none")


def check_recipe(data: PolicyDataset, recipe: Recipe, name: str) -> None:
    """`recipe` (called `name`) renders, on the frames of `data`, a sample with a target (a recipe with
    targets) or one that trains actions (a recipe without)."""
    dataset = data.dataset
    check_language(dataset, recipe, name)
    text = teaches_text(recipe)
    for position in data.positions:
        item, _ = data.frames.rendered(position)
        if item is None:
            continue
        if item["target_message_indices"] if text else "low_level" in item["message_streams"]:
            return
    what = "a target" if text else "a low-level turn (actions)"
    raise ConfigError(f"recipe {name!r} renders no sample with {what} on the {len(data.positions)} training frames "
                      f"of {dataset.root} (`steerable info` lists its language rows): annotate the styles it reads "
                      "first, or pass a --recipe that fits the dataset")
