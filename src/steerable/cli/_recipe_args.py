"""Arguments shared by the commands that load a recipe: --recipe, --camera_map, --compat."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from steerable.errors import ConfigError

if TYPE_CHECKING:  # registering parsers must stay cheap: recipes (numpy, pyarrow) load when a command runs
    from steerable.recipes.render import RenderOptions

__all__ = ["add_recipe_args", "camera_map", "render_options"]


def add_recipe_args(parser: argparse.ArgumentParser, *, recipe_required: bool = True) -> None:
    parser.add_argument(
        "--recipe", required=recipe_required, help="a built-in recipe name (e.g. subtask_mem) or a YAML file"
    )
    parser.add_argument(
        "--camera_map",
        action="append",
        default=[],
        metavar="RECIPE_KEY=DATASET_KEY",
        help="bind a recipe camera to a dataset camera (repeatable)",
    )
    parser.add_argument(
        "--compat",
        choices=["steerable", "lerobot"],
        default="steerable",
        help="lerobot: the reference behaviour wherever steerable's default differs (see docs/recipes.md)",
    )


def camera_map(pairs: list[str]) -> dict[str, str]:
    mapping: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise ConfigError(f"--camera_map takes RECIPE_KEY=DATASET_KEY, got {pair!r}")
        mapping[key.strip()] = value.strip()
    return mapping


def render_options(args: argparse.Namespace) -> RenderOptions:
    from steerable.recipes.render import RenderOptions

    return RenderOptions(compat=args.compat)
