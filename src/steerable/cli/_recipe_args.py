"""Arguments shared by the commands that load a recipe: --recipe, --camera_map, --compat."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import TYPE_CHECKING

from steerable.errors import ConfigError

if TYPE_CHECKING:  # registering parsers must stay cheap: recipes (numpy, pyarrow) load when a command runs
    from steerable.recipes.render import RenderOptions

__all__ = ["add_recipe_args", "camera_map", "render_options"]

_IMAGES_PREFIX = "observation.images."


def add_recipe_args(parser: argparse.ArgumentParser, *, recipe_required: bool = True) -> None:
    parser.add_argument(
        "--recipe", required=recipe_required, help="a built-in recipe name (e.g. subtask_mem) or a YAML file"
    )
    parser.add_argument(
        "--camera_map",
        action="append",
        default=[],
        metavar="RECIPE_KEY=DATASET_KEY",
        help="bind a recipe camera (top or observation.images.top) to a dataset camera (repeatable); "
        "keys a recipe does not use are ignored with a warning",
    )
    parser.add_argument(
        "--compat",
        choices=["steerable", "lerobot"],
        default="steerable",
        help="lerobot: the reference behaviour wherever steerable's default differs (see docs/recipes.md)",
    )


def camera_map(pairs: list[str], dataset_cameras: Sequence[str] = ()) -> dict[str, str]:
    """`--camera_map` pairs as a dict. Either side may be a short name or a full key: the recipe side
    is resolved by the recipe loader; a short dataset side (`front`) becomes the dataset's
    `observation.images.front` when the dataset has that camera and no camera named `front`."""
    mapping: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = (s.strip() for s in pair.partition("="))
        if not sep or not key or not value:
            raise ConfigError(f"--camera_map takes RECIPE_KEY=DATASET_KEY, got {pair!r}")
        full = _IMAGES_PREFIX + value
        if value not in dataset_cameras and full in dataset_cameras:
            value = full
        mapping[key] = value
    return mapping


def render_options(args: argparse.Namespace) -> RenderOptions:
    from steerable.recipes.render import RenderOptions

    return RenderOptions(compat=args.compat)
