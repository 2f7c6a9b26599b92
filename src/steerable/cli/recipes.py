"""`steerable recipes list|show|lint`: the built-in recipes, and checking a recipe before training."""

from __future__ import annotations

import argparse
from importlib import resources

from rich.console import Console

from steerable.cli._recipe_args import camera_map

__all__ = ["register"]


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("recipes", help="list, show or lint training recipes")
    verbs = parser.add_subparsers(dest="verb", metavar="VERB", required=True)
    verbs.add_parser("list", help="the built-in recipes").set_defaults(func=run_list)
    show = verbs.add_parser("show", help="print a built-in recipe's YAML")
    show.add_argument("name")
    show.set_defaults(func=run_show)
    lint = verbs.add_parser("lint", help="validate a recipe (and, with --dataset, check it fits that dataset)")
    lint.add_argument("recipe", help="YAML file or built-in name")
    lint.add_argument("--dataset", help="dataset the recipe will be rendered on")
    lint.add_argument("--camera_map", action="append", default=[], metavar="RECIPE_KEY=DATASET_KEY",
                      help="bind a recipe camera to a dataset camera (repeatable)")
    lint.set_defaults(func=run_lint)


def run_list(args: argparse.Namespace) -> int:
    from steerable.recipes import builtin_recipe_names, load_recipe

    console = Console(highlight=False, soft_wrap=True)
    for name in builtin_recipe_names():
        recipe = load_recipe(name)
        parts = ", ".join(f"{n} {c.weight:g}" for n, c in recipe.components() if n) or "message recipe"
        console.print(f"[bold]{name}[/bold]: {recipe.description or ''}\n    {parts}")
    return 0


def run_show(args: argparse.Namespace) -> int:
    from steerable.recipes import load_recipe

    load_recipe(args.name)  # validates the name (clear error for an unknown one)
    print((resources.files("steerable.recipes") / "builtin" / f"{args.name}.yaml").read_text(encoding="utf-8"))
    return 0


def run_lint(args: argparse.Namespace) -> int:
    """Exit 0: valid (warnings allowed); 1: renders no sample on --dataset; 2: invalid recipe or input."""
    from steerable.recipes import load_recipe
    from steerable.train.lint import lint_against_dataset

    console = Console(highlight=False, soft_wrap=True, markup=False)  # paths and row text, verbatim
    if args.dataset is None:
        recipe = load_recipe(args.recipe, camera_map=camera_map(args.camera_map))
        console.print(f"{args.recipe}: valid ({len(recipe.components())} component(s))")
        return 0
    from steerable.dataset import open_dataset

    ds = open_dataset(args.dataset)
    recipe = load_recipe(args.recipe, camera_map=camera_map(args.camera_map, ds.camera_keys))
    problems, warnings = lint_against_dataset(recipe, ds)
    for w in warnings:
        console.print(f"warning: {w}")
    for p in problems:
        console.print(f"error: {p}")
    if problems:
        return 1
    console.print(f"{args.recipe}: valid for {args.dataset}" + (f" ({len(warnings)} warning(s))" if warnings else ""))
    return 0
