"""Recipes: YAML templates that turn an episode's language rows into chat training samples."""

from steerable.recipes.blend import WeightedChoice, choose_component, hash64, rephrasing_index
from steerable.recipes.expressions import DEFAULT_BINDINGS, ResolverCall, parse_resolver, resolver_call
from steerable.recipes.loading import builtin_recipe_names, load_recipe, parse_recipe
from steerable.recipes.model import MessageTurn, Recipe
from steerable.recipes.render import (
    FrameRenderer,
    RenderedSample,
    RenderOptions,
    render_sample,
    render_sample_reference,
)
from steerable.recipes.resolvers import EMITTED_AT_TOLERANCE_S, EpisodeTimeline

__all__ = [
    "DEFAULT_BINDINGS",
    "EMITTED_AT_TOLERANCE_S",
    "EpisodeTimeline",
    "FrameRenderer",
    "MessageTurn",
    "Recipe",
    "RenderOptions",
    "RenderedSample",
    "ResolverCall",
    "WeightedChoice",
    "builtin_recipe_names",
    "choose_component",
    "hash64",
    "load_recipe",
    "parse_recipe",
    "parse_resolver",
    "rephrasing_index",
    "render_sample",
    "render_sample_reference",
    "resolver_call",
]
