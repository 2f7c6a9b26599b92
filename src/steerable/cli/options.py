"""Settings pieces several commands share: the dataset they read, the episodes they pick, the recipe
they render.

One spelling each, old ones kept as aliases: the dataset is the positional DATASET (also `--dataset`,
`--root`, `--repo_id`), the episodes `--episodes 0,3,7-9` (also `--only_episodes`), the recipe
`--recipe` with `--camera_map` (repeatable) and `--compat`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

from pydantic import AliasChoices, Field

from steerable.errors import ConfigError

# The episode pick is the settings layer's (annotate, train and run read it too); named here with the rest.
from steerable.settings import Episodes, Settings, episodes_field, parse_episodes

if TYPE_CHECKING:  # the recipes (numpy, pyarrow) load when a command runs
    from steerable.recipes.render import RenderOptions

__all__ = ["Episodes", "RecipeOptions", "camera_map", "dataset_field", "episodes_field", "parse_episodes"]

_IMAGES_PREFIX = "observation.images."


def dataset_field(description: str, *, required: bool = True) -> Any:
    """The positional DATASET, also spelled --dataset, --root or --repo_id."""
    return Field(... if required else None, validation_alias=AliasChoices("dataset", "root", "repo_id"),
                 description=description)


class RecipeOptions(Settings):
    """--recipe, --camera_map and --compat: how a command loads and renders a recipe."""

    recipe: str = Field(description="a built-in recipe name (e.g. subtask_mem) or a YAML file")
    camera_map: list[str] = Field(
        [], json_schema_extra={"repeat": True},
        description="RECIPE_KEY=DATASET_KEY: bind a recipe camera (top or observation.images.top) to a dataset "
        "camera; keys a recipe does not use are ignored with a warning")
    compat: Literal["steerable", "lerobot"] = Field(
        "steerable", description="lerobot: the reference behaviour wherever steerable's default differs "
        "(see docs/recipes.md)")

    def cameras(self, dataset_cameras: Sequence[str] = ()) -> dict[str, str]:
        return camera_map(self.camera_map, dataset_cameras)

    def render_options(self) -> RenderOptions:
        from steerable.recipes.render import RenderOptions

        return RenderOptions(compat=self.compat)


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
