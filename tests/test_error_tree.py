"""The one error tree: every exception steerable defines is a SteerableError, drawn in errors.py.

Read from the source (ast), so no optional dependency has to be importable: every class of
src/steerable whose bases reach a builtin exception is found, wherever it lives.
"""

from __future__ import annotations

import ast
import builtins
import re
from dataclasses import dataclass
from pathlib import Path

import steerable.errors

SRC = Path(steerable.errors.__file__).parent
ROOT = "SteerableError"


@dataclass(frozen=True)
class ExceptionClass:
    name: str
    module: str  # dotted, relative to steerable
    bases: tuple[str, ...]


def _base_name(node: ast.expr) -> str:
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""


def _builtin_exception(name: str) -> bool:
    value = getattr(builtins, name, None)
    return isinstance(value, type) and issubclass(value, BaseException)


def _classes() -> dict[str, list[ExceptionClass]]:
    found: dict[str, list[ExceptionClass]] = {}
    for path in sorted(SRC.rglob("*.py")):
        module = ".".join(path.relative_to(SRC).with_suffix("").parts)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                bases = tuple(_base_name(b) for b in node.bases)
                found.setdefault(node.name, []).append(ExceptionClass(node.name, module, bases))
    return found


def _exceptions() -> list[ExceptionClass]:
    classes = _classes()

    def is_exception(name: str, seen: frozenset[str] = frozenset()) -> bool:
        if _builtin_exception(name) or name.endswith(("Error", "Exception")):
            return True
        return name not in seen and any(
            is_exception(base, seen | {name}) for c in classes.get(name, []) for base in c.bases
        )

    return [c for defs in classes.values() for c in defs if any(is_exception(b) for b in c.bases)]


def _in_tree(name: str, by_name: dict[str, ExceptionClass]) -> bool:
    return name == ROOT or (name in by_name and any(_in_tree(b, by_name) for b in by_name[name].bases))


def test_exception_class_names_are_unique() -> None:
    names = [c.name for c in _exceptions()]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)


def test_every_public_exception_is_a_steerable_error() -> None:
    """Private ones (`_Refused`...) are control flow inside one module, never seen by a caller."""
    exceptions = _exceptions()
    by_name = {c.name: c for c in exceptions}
    assert {"SteerableError", "WriteError", "ReplyParseError", "AttemptError", "RecipeFieldError"} <= set(by_name)
    outside = [f"{c.module}.{c.name}" for c in exceptions
               if c.name != ROOT and not c.name.startswith("_") and not _in_tree(c.name, by_name)]
    assert not outside, f"derive these from SteerableError (errors.py): {outside}"


def test_private_exceptions_stay_in_their_module() -> None:
    for c in _exceptions():
        if not c.name.startswith("_"):
            continue
        users = [p for p in SRC.rglob("*.py") if re.search(rf"\b{c.name}\b", p.read_text(encoding="utf-8"))]
        assert [".".join(p.relative_to(SRC).with_suffix("").parts) for p in users] == [c.module], c.name


_LINE = re.compile(r"^(?P<indent> *)(?P<name>\w+)(?:\((?P<builtins>[\w, ]+)\))?(?: +\[(?P<module>[\w.]+)\])?$")


def _drawn_tree() -> dict[str, tuple[str | None, tuple[str, ...], str]]:
    """name -> (parent, builtins in parentheses, module) from the tree in errors.py's docstring."""
    doc = steerable.errors.__doc__ or ""
    block = doc.split("The tree", 1)[1].split("\n\n", 2)[1]
    drawn: dict[str, tuple[str | None, tuple[str, ...], str]] = {}
    stack: list[tuple[int, str]] = []
    for line in block.splitlines():
        match = _LINE.match(line)
        assert match, f"errors.py tree line not understood: {line!r}"
        depth = len(match["indent"])
        while stack and stack[-1][0] >= depth:
            stack.pop()
        parent = stack[-1][1] if stack else None
        names = tuple(n.strip() for n in (match["builtins"] or "").split(",") if n.strip())
        assert match["name"] not in drawn, f"{match['name']} drawn twice"
        drawn[match["name"]] = (parent, names, match["module"] or "errors")
        stack.append((depth, match["name"]))
    return drawn


def test_the_tree_in_errors_docstring_draws_every_class_where_it_is() -> None:
    by_name = {c.name: c for c in _exceptions()}
    tree = {n: c for n, c in by_name.items() if not n.startswith("_") and _in_tree(n, by_name)}
    expected = {}
    for name, c in tree.items():
        parents = [b for b in c.bases if b in tree]
        builtin_bases = tuple(b for b in c.bases if _builtin_exception(b) and b != "Exception")
        expected[name] = (parents[0] if parents else None, builtin_bases, c.module)
    drawn = _drawn_tree()
    missing, extra = sorted(set(expected) - set(drawn)), sorted(set(drawn) - set(expected))
    assert not missing and not extra, f"add to the tree in errors.py: {missing}; no such class: {extra}"
    wrong = {n: (drawn[n], want) for n, want in expected.items() if drawn[n] != want}
    assert not wrong, f"drawn (parent, builtins, module) vs the code: {wrong}"
