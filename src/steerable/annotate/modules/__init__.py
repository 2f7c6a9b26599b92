"""The annotation modules, one folder each: plan, interjections, vqa, motion (see `annotate/registry.py`).

A module folder's `__init__` imports only its settings and stage (so `steerable annotate --help`
stays cheap); the rest of its public names load on first use through `lazy_exports`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib import import_module
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(package: str, names: Mapping[str, str]) -> Callable[[str], Any]:
    """A module `__getattr__` that imports `names[attr]` (a submodule of `package`) on first access."""

    def __getattr__(attr: str) -> Any:
        submodule = names.get(attr)
        if submodule is None:
            raise AttributeError(f"module {package!r} has no attribute {attr!r}")
        return getattr(import_module(f"{package}.{submodule}"), attr)

    return __getattr__
