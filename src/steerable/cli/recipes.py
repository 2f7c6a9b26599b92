"""`steerable recipes list|show|lint|export`: the built-in recipes, checking a recipe before training
(for steerable, or with --lerobot for LeRobot's own loader), and writing one in LeRobot's form."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any, ClassVar

from pydantic import Field
from rich.console import Console

from steerable.cli.options import camera_map
from steerable.errors import ConfigError
from steerable.settings import Settings

__all__ = ["RecipesExportSettings", "RecipesLintSettings", "RecipesListSettings", "RecipesShowSettings", "register"]

USAGE = """usage: steerable recipes VERB [...]

List, show, lint or export training recipes. VERB is one of:
  list      the built-in recipes
  show      print a built-in recipe's YAML (steerable recipes show NAME)
  lint      validate a recipe, and with --dataset check it fits that dataset (steerable recipes lint RECIPE)
  export    write a recipe in the form another tool's loader accepts (steerable recipes export RECIPE --lerobot)
`steerable recipes VERB --help` lists the verb's options.
"""
_CAMERA_MAP = "RECIPE_KEY=DATASET_KEY: bind a recipe camera to a dataset camera"


class RecipesListSettings(Settings):
    """`steerable recipes list`: no options."""


class RecipesShowSettings(Settings):
    """`steerable recipes show NAME`."""

    positional: ClassVar[tuple[str, ...]] = ("name",)

    name: str = Field(description="a built-in recipe name")


class RecipesLintSettings(Settings):
    """`steerable recipes lint RECIPE`: the recipe, and what to check it against."""

    positional: ClassVar[tuple[str, ...]] = ("recipe",)
    doc: ClassVar[str | None] = "docs/recipes.md"

    recipe: str = Field(description="YAML file or built-in name")
    dataset: str | None = Field(None, description="dataset the recipe will be rendered on")
    camera_map: list[str] = Field([], json_schema_extra={"repeat": True}, description=_CAMERA_MAP)
    lerobot: bool = Field(False, description="check the file as LeRobot's load_recipe reads it (exit 1 when LeRobot "
                          "refuses it)")


class RecipesExportSettings(Settings):
    """`steerable recipes export RECIPE --lerobot`: the recipe, its form, and where it goes."""

    positional: ClassVar[tuple[str, ...]] = ("recipe",)
    doc: ClassVar[str | None] = "docs/recipes.md"

    recipe: str = Field(description="YAML file or built-in name")
    lerobot: bool = Field(False, description="LeRobot's recipe form (the one format so far)")
    out: str | None = Field(None, description="write the YAML here instead of to stdout")
    camera_map: list[str] = Field([], json_schema_extra={"repeat": True}, description=_CAMERA_MAP + " before writing")


def register(sub: argparse._SubParsersAction) -> None:
    from steerable.cli.flags import add_command

    add_command(sub, "recipes", help="list, show or lint training recipes", func=run)


def run(args: argparse.Namespace) -> int:
    """The verb is the first word; its options are read as every command's."""
    from steerable.cli.flags import parse_command, suggest

    verbs: dict[str, tuple[type[Settings], Callable[[Any], int]]] = {
        "list": (RecipesListSettings, run_list), "show": (RecipesShowSettings, run_show),
             "lint": (RecipesLintSettings, run_lint), "export": (RecipesExportSettings, run_export)}
    options = list(args.options)
    verb = options.pop(0) if options and not options[0].startswith("-") else None
    if verb is None and any(o in ("-h", "--help") for o in options):
        print(USAGE.rstrip("\n"))
        return 0
    if verb not in verbs:
        got = f"unknown verb {verb!r}{suggest(verb, verbs, '')}" if verb else "no verb given"
        raise ConfigError(f"recipes takes a verb first, one of {', '.join(verbs)}: {got}")
    model, func = verbs[verb]
    args.options = options
    cfg = parse_command(model, args, f"usage: steerable recipes {verb} [...]\n\n{model.__doc__}\n")
    return 0 if cfg is None else func(cfg)


def run_list(args: RecipesListSettings) -> int:
    from steerable.recipes import builtin_recipe_names, load_recipe

    console = Console(highlight=False, soft_wrap=True)
    for name in builtin_recipe_names():
        recipe = load_recipe(name)
        parts = ", ".join(f"{n} {c.weight:g}" for n, c in recipe.components() if n) or "message recipe"
        console.print(f"[bold]{name}[/bold]: {recipe.description or ''}\n    {parts}")
    return 0


def run_show(args: RecipesShowSettings) -> int:
    from steerable.recipes import load_recipe

    load_recipe(args.name)  # validates the name (clear error for an unknown one)
    print((resources.files("steerable.recipes") / "builtin" / f"{args.name}.yaml").read_text(encoding="utf-8"))
    return 0


def run_lint(args: RecipesLintSettings) -> int:
    """Exit 0: valid (warnings allowed); 1: renders no sample on --dataset; 2: invalid recipe or input."""
    from steerable.recipes import load_recipe
    from steerable.train.lint import lint_against_dataset

    console = Console(highlight=False, soft_wrap=True, markup=False)  # paths and row text, verbatim
    if args.lerobot:
        refused = _lint_for_lerobot(args.recipe, console)
        if refused or args.dataset is None:
            return 1 if refused else 0
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


def _lint_for_lerobot(source: str, console: Console) -> bool:
    """Print whether LeRobot's load_recipe takes the file as it is; True when it refuses it."""
    import yaml

    from steerable.recipes import load_recipe
    from steerable.recipes.lerobot_check import (
        LEROBOT_RELEASE,
        check_for_lerobot,
        lerobot_installed,
        lerobot_load_error,
    )

    load_recipe(source)  # a file steerable cannot read at all is an input error (exit 2), with its line
    path = _recipe_path(source)
    verdict = check_for_lerobot(yaml.safe_load(path.read_text(encoding="utf-8")))
    for hazard in verdict.hazards:
        console.print(f"warning: {hazard}")
    for refusal in verdict.refusals:
        console.print(f"error: {refusal}")
    refused = not verdict.accepted
    if lerobot_installed():  # the installed LeRobot has the last word
        import lerobot

        error = lerobot_load_error(path)
        seen = f"LeRobot {getattr(lerobot, '__version__', '?')} (installed)"
        if (error is not None) != refused:
            console.print(f"note: {seen} disagrees with steerable's LeRobot {LEROBOT_RELEASE} rules")
        refused = error is not None
        if error is not None:
            console.print(f"error: {seen} load_recipe: {error}")
    else:
        seen = f"LeRobot {LEROBOT_RELEASE} (its rules, checked without LeRobot installed)"
    if refused:
        console.print(f"{source}: {seen} refuses it; `steerable recipes export {source} --lerobot` writes a "
                      "form it accepts")
    else:
        warned = f" ({len(verdict.hazards)} warning(s))" if verdict.hazards else ""
        console.print(f"{source}: {seen} loads it{warned}")
    return refused


def _recipe_path(source: str) -> Path:
    from steerable.recipes import builtin_recipe_names

    if source in builtin_recipe_names():
        return Path(str(resources.files("steerable.recipes") / "builtin" / f"{source}.yaml"))
    return Path(source)


def run_export(args: RecipesExportSettings) -> int:
    """The YAML goes to stdout (or --out); what differs from the steerable recipe goes to stderr."""
    from steerable.dataset.atomic import atomic_write_bytes
    from steerable.recipes import load_recipe
    from steerable.recipes.lerobot_export import export_for_lerobot

    if not args.lerobot:
        raise ConfigError("recipes export writes LeRobot's recipe form: add --lerobot")
    recipe = load_recipe(args.recipe, camera_map=camera_map(args.camera_map))
    exported = export_for_lerobot(recipe, name=args.recipe)
    if args.out:
        atomic_write_bytes(Path(args.out), exported.text.encode("utf-8"))
    else:
        sys.stdout.write(exported.text)
    err = Console(stderr=True, highlight=False, soft_wrap=True, markup=False)
    where = f" to {args.out}" if args.out else ""
    err.print(f"{args.recipe}: wrote LeRobot's form{where}; what differs from the steerable recipe:")
    for difference in exported.differences:
        err.print(f"  - {difference}")
    return 0
