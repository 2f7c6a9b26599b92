"""The runtime's seams (#38): one-way imports inside runtime/, no simulator behind the contract, typed stack."""

from __future__ import annotations

import ast
from pathlib import Path

import steerable.runtime

RUNTIME = Path(steerable.runtime.__file__).parent


def _imports(path: Path) -> set[str]:
    """Every steerable module `path` imports, wherever (function bodies and TYPE_CHECKING blocks too)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {name for name in found if name.startswith("steerable.")}


def _runtime_modules() -> dict[str, Path]:
    return {"steerable." + ".".join(p.relative_to(RUNTIME.parent).with_suffix("").parts): p
            for p in RUNTIME.rglob("*.py") if p.name != "__init__.py"}


def test_no_two_runtime_modules_import_each_other() -> None:
    modules = _runtime_modules()
    edges = {name: _imports(path) & modules.keys() for name, path in modules.items()}
    pairs = sorted({tuple(sorted((a, b))) for a, targets in edges.items() for b in targets if a in edges[b]})
    assert pairs == []
