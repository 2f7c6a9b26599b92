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
    """(problems, warnings) of rendering `recipe` on `ds`.

    A problem means the recipe renders no sample at all on `ds`: no component has a supervised turn
    (`target` or `stream: low_level`) that can appear, because each one is guarded by a binding that
    matches no row of the dataset. Everything else is a warning: recipe cameras the dataset lacks
    (rebound with --camera_map when rendering, so the same recipe lints before the mapping is known),
    and bindings that match no row (turns that never render).
    """
    problems: list[str] = []
    warnings: list[str] = []
    missing = sorted(k for k in recipe.camera_keys if k not in ds.camera_keys)
    if missing:
        names = {key: name for name, key in recipe.cameras.items()}
        hint = " ".join(f"{names.get(k, k)}=<one of {', '.join(ds.camera_keys) or 'no cameras'}>" for k in missing)
        warnings.append(
            f"recipe cameras {missing} are not in the dataset (cameras: {ds.camera_keys}); "
            f"rendering needs --camera_map {hint}"
        )
    present = row_selectors(ds) if ds.has_language else set()
    if not ds.has_language:
        warnings.append(f"{ds.root} has no language columns (annotate it with `steerable annotate`)")
    renders = False
    for name, component in recipe.components():
        label = f"component {name!r}" if name else "recipe"
        # A binding read only by `if_absent` that matches no row just never leaves a turn out.
        turns = component.messages or ()
        conditions = {t.if_absent for t in turns if t.if_absent} - {n for t in turns for n in t.value_bindings}
        never = {
            binding
            for binding in component.referenced_binding_names() - {"task"} - conditions
            if not any(_matches(component.binding(binding), s) for s in present)
        }
        for binding in sorted(never):
            warnings.append(
                f"{label}: binding {binding!r} ({component.binding(binding)}) matches no row of the dataset, "
                "so turns that need it never render"
            )
        supervised = [t for t in component.messages or () if t.target or t.stream == "low_level"]
        renders = renders or any(t.if_present is None or t.if_present not in never for t in supervised)
    if not renders:
        problems.append(
            f"the recipe renders no sample on {ds.root}: every supervised turn needs rows the dataset "
            "does not have (see the warnings)"
        )
    return problems, warnings
