"""Lazy package exports: a package `__init__` names its API but loads heavy submodules on first use.

Keeps `steerable --help` and `steerable annotate --help` free of numpy, pyarrow and PIL.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib import import_module
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(package: str, names: Mapping[str, str]) -> Callable[[str], Any]:
    """A module `__getattr__` that imports `names[attr]` (a submodule of `package`) on first access.

    Pair it with the same imports under `if TYPE_CHECKING:` so type checkers see the real names.
    """

    def __getattr__(attr: str) -> Any:
        submodule = names.get(attr)
        if submodule is None:
            raise AttributeError(f"module {package!r} has no attribute {attr!r}")
        return getattr(import_module(f"{package}.{submodule}"), attr)

    return __getattr__
