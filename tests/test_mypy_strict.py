"""The packages checked under `mypy --strict` (pyproject.toml): the list names them and only grows."""

from __future__ import annotations

from pathlib import Path

import tomllib

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"

# What `mypy --strict` turns on that a per-module override can say (`strict = true` cannot be said there).
STRICT_FLAGS = {
    "disallow_any_generics", "disallow_subclassing_any", "disallow_untyped_calls", "disallow_untyped_defs",
    "disallow_incomplete_defs", "disallow_untyped_decorators", "check_untyped_defs", "warn_return_any",
    "no_implicit_reexport", "strict_equality", "extra_checks",
}
# Issue #38's strict packages so far; a package joins here and in pyproject.toml together.
STRICT_PACKAGES = {"steerable.control", "steerable.errors", "steerable.language", "steerable.vlm"}


def _strict_modules() -> set[str]:
    mypy = tomllib.loads(PYPROJECT.read_text())["tool"]["mypy"]
    modules: set[str] = set()
    for override in mypy.get("overrides", []):
        if {flag for flag, on in override.items() if on is True} >= STRICT_FLAGS:
            names = override["module"]
            modules.update([names] if isinstance(names, str) else names)
    return modules


def test_the_strict_packages_are_checked_with_every_strict_flag() -> None:
    modules = _strict_modules()
    for package in STRICT_PACKAGES:
        assert package in modules, f"{package} is not under the strict mypy flags"
        if package != "steerable.errors":
            assert f"{package}.*" in modules, f"{package}'s modules are not under the strict mypy flags"
    mypy = tomllib.loads(PYPROJECT.read_text())["tool"]["mypy"]
    assert mypy.get("warn_unused_ignores") and mypy.get("warn_redundant_casts")
