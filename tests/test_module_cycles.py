"""No two modules of dataset/, viewer/, recipes/ or synthetic/ import each other, however indirectly (#38).

Every import counts: at the top, inside a function, under TYPE_CHECKING. A circle was
`dataset/lineage` <-> `summary`, `dataset/review` -> `writer` -> `info_update` -> `review`,
`recipes/building` <-> `model`, `synthetic/env` <-> `planner`, `synthetic/generate` <-> `object_schema`
and `viewer/edit` <-> `server`; the shared piece now sits below both (or is passed in).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import steerable

SRC = Path(steerable.__file__).parent.parent


def imported(path: Path) -> set[str]:
    """Every module (and `module.name`) `path` imports, wherever the import statement is."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def module_graph(package: str) -> dict[str, set[str]]:
    """module -> the modules of the same package it imports (the package's __init__ left out)."""
    root = SRC / "steerable" / package
    modules = {".".join(p.relative_to(SRC).with_suffix("").parts): p
               for p in root.rglob("*.py") if p.name != "__init__.py"}
    return {name: (imported(path) & modules.keys()) - {name} for name, path in modules.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (each a circle of imports), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def test_the_cycle_finder_finds_a_circle_through_three_modules() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_imports_inside_functions_and_type_checking_blocks_count(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from steerable.viewer.server import ViewerServer\n"
        "def f():\n    import steerable.viewer.edit\n"
    )
    assert {"steerable.viewer.server", "steerable.viewer.edit"} <= imported(source)


@pytest.mark.parametrize("package", ["dataset", "viewer", "recipes", "synthetic"])
def test_no_module_cycles(package: str) -> None:
    assert cycles(module_graph(package)) == []
