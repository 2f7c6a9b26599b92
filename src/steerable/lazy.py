"""Lazy package exports: a package `__init__` names its API but loads heavy submodules on first use.

Keeps `steerable --help` and `steerable annotate --help` free of numpy, pyarrow and PIL.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Collection, Mapping
from importlib import import_module
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str,
    names: Mapping[str, str],
    *,
    needs: Collection[str] = (),
    missing: Callable[[str], ImportError] | None = None,
) -> Callable[[str], Any]:
    """A module `__getattr__` that imports `names[attr]` (a submodule of `package`) on first access.

    An ImportError of one of the optional packages in `needs` becomes `missing(package name)`, the
    MissingExtraError that names the extra to install. A loaded name is kept in the package, so
    later look-ups skip this function. Pair it with the same imports under `if TYPE_CHECKING:` so
    type checkers see the real names.
    """

    def __getattr__(attr: str) -> Any:
        submodule = names.get(attr)
        if submodule is None:
            raise AttributeError(f"module {package!r} has no attribute {attr!r}")
        try:
            value = getattr(import_module(f"{package}.{submodule}"), attr)
        except ImportError as exc:
            top = (exc.name or "").split(".")[0]
            if missing is not None and top in needs:
                raise missing(top) from exc
            raise
        setattr(sys.modules[package], attr, value)
        return value

    return __getattr__
