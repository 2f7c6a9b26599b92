"""Does a recipe fit a dataset? Cameras exist, and every binding can resolve on some frame."""

from __future__ import annotations

from typing import Any

from steerable.dataset import LeRobotDataset
from steerable.dataset.parquet import file_metadata, read_parquet
from steerable.language.rows import rows_from_arrow
from steerable.language.styles import LANGUAGE_COLUMNS
from steerable.recipes import Recipe

__all__ = ["lint_against_dataset", "row_selectors"]

Selector = tuple[str | None, str | None, str | None, str | None]  # style, role, camera, tool name


def row_selectors(ds: LeRobotDataset) -> set[Selector]:
    """Every (style, role, camera, tool name) combination the dataset's language rows carry."""
    found: set[Selector] = set()
    for path in ds.data_files():
        names = file_metadata(path).schema.to_arrow_schema().names
        cols = [c for c in LANGUAGE_COLUMNS if c in names]
        if not cols:
            continue
        table = read_parquet(path, cols)
        for col in cols:
            for rows in rows_from_arrow(table.column(col)):
                for row in rows:
                    tools = [
                        c.get("function", {}).get("name")
                        for c in (row.get("tool_calls") or [])
                        if isinstance(c, dict)
                    ] or [None]
                    for tool in tools:
                        found.add((row.get("style"), row.get("role"), row.get("camera"), tool))
    return found


def _matches(call: Any, selector: Selector) -> bool:
    want = (call.style, call.role, call.camera, call.tool_name)
    return all(w is None or w == have for w, have in zip(want, selector, strict=True))


def lint_against_dataset(recipe: Recipe, ds: LeRobotDataset) -> tuple[list[str], list[str]]:
    """(problems, warnings). Problems make rendering fail; warnings mean parts that never render."""
    problems: list[str] = []
    warnings: list[str] = []
    missing = sorted(k for k in recipe.camera_keys if k not in ds.camera_keys)
    if missing:
        problems.append(
            f"recipe cameras {missing} are not in the dataset (cameras: {ds.camera_keys}); "
            "bind them with --camera_map RECIPE_KEY=DATASET_KEY"
        )
    if not ds.has_language:
        problems.append(f"{ds.root} has no language columns: annotate it first (`steerable annotate`)")
        return problems, warnings
    present = row_selectors(ds)
    for name, component in recipe.components():
        label = f"component {name!r}" if name else "recipe"
        for binding in sorted(component.referenced_binding_names() - {"task"}):
            call = component.binding(binding)
            if not any(_matches(call, s) for s in present):
                warnings.append(
                    f"{label}: binding {binding!r} ({call}) matches no row of the dataset, "
                    "so turns that need it never render"
                )
    return problems, warnings
