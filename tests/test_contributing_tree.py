"""CONTRIBUTING.md's tree names every module of src/steerable, and no module that is gone.

The rule, strict enough that a new module fails it. The block under "## The tree" has one entry per
top-level module or package: a line indented two spaces (`errors.py  ...`, `dataset/  ...`), its
continuation lines indented further. A module `src/steerable/<pkg>/.../<stem>.py` is named when
`<stem>.py` appears in the entry of `<pkg>/`, and not as the tail of a path (`recipes/live.py` in the
runtime entry names the recipes module), once for each module of that name in `<pkg>` (a new
`runtime/policy.py` beside `runtime/lerobot/policy.py` needs a second mention); a top-level
module is named by an entry of its own; a subpackage `<pkg>/.../<sub>/` is named when `<sub>/`
appears in the entry of `<pkg>/`. A bare word does not count (`state` in prose would hide a new
`state.py`), nor a name in another package's entry.
Not named one by one, because the page covers them as groups: every `__init__.py`, `__main__.py`,
the per-command modules `cli/<command>.py` (`cli.main.SUBCOMMANDS`: "one module per subcommand") and
the files inside `annotate/modules/<name>/` (the per-module layout).

The other way: every `<name>.py` the block mentions exists under its entry's package (anywhere below
it), and a path such as `dataset/lock.py` or `tests/test_error_tree.py` exists from src/steerable or
from the repository root, so a deleted or renamed module fails too.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from pathlib import Path

from steerable.cli.main import SUBCOMMANDS

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src" / "steerable"

# A file name ending in .py, with the path before it if any; not part of a longer word or path.
_MENTION = re.compile(r"(?<![\w./])((?:[\w<>*-]+/)*)([A-Za-z_]\w*)\.py\b")
_GROUPED = {"__init__.py", "__main__.py"}


def tree_block(contributing: str) -> str:
    """The fenced block under "## The tree"."""
    section = contributing.split("\n## The tree\n", 1)[1]
    return section.split("```", 2)[1]


def entries(block: str) -> dict[str, str]:
    """Each entry's first word (`errors.py`, `dataset/`) -> its text, continuation lines included."""
    found: dict[str, str] = {}
    key = ""
    for line in block.splitlines():
        if re.match(r"  \S", line):
            key = line.split()[0]
            found[key] = line
        elif key:
            found[key] += "\n" + line
    return found


def _mentions(entry: str, file_name: str) -> int:
    return sum(not path and f"{stem}.py" == file_name for path, stem in _MENTION.findall(entry))


def _names_folder(entry: str, folder: str) -> bool:
    return re.search(rf"(?<![\w/]){re.escape(folder)}/", entry) is not None


def unnamed(src: Path, block: str, commands: Collection[str]) -> list[str]:
    """Modules and subpackages under `src` the block does not name by the rule above."""
    by_entry = entries(block)
    missing = []
    same_name: dict[tuple[str, str], list[str]] = {}  # (package, file name) -> the modules
    for path in sorted(src.rglob("*.py")):
        relative = path.relative_to(src)
        parts = relative.parts
        if path.name in _GROUPED or "__pycache__" in parts:
            continue
        if len(parts) == 1:
            if path.name not in by_entry:
                missing.append(f"{relative} (no entry of its own)")
            continue
        package = parts[0]
        if package == "cli" and len(parts) == 2 and path.stem in commands:
            continue
        if parts[:2] == ("annotate", "modules") and len(parts) > 3:
            continue
        same_name.setdefault((package, path.name), []).append(relative.as_posix())
    for (package, name), modules in same_name.items():
        if _mentions(by_entry.get(f"{package}/", ""), name) < len(modules):
            missing.extend(f"{module} (as `{name}` in the `{package}/` entry)" for module in modules)
    for init in sorted(src.glob("*/*/**/__init__.py")):
        parts = init.parent.relative_to(src).parts
        if parts[:2] == ("annotate", "modules") and len(parts) > 2:
            continue
        if not _names_folder(by_entry.get(f"{parts[0]}/", ""), parts[-1]):
            missing.append(f"{'/'.join(parts)}/ (as `{parts[-1]}/` in the `{parts[0]}/` entry)")
    return sorted(missing)


def gone(src: Path, repo: Path, block: str) -> list[str]:
    """`name.py` mentions in the block with no such module where the mention points."""
    missing = []
    for key, entry in entries(block).items():
        below = src / key if key.endswith("/") else src
        for path, stem in _MENTION.findall(entry):
            name = f"{path}{stem}.py"
            if "<" in path or "*" in path:
                continue  # a pattern (modules/<name>/), not a file
            exists = (src / name).is_file() or (repo / name).is_file() if path else any(below.rglob(name))
            if not exists:
                missing.append(f"{name} (in the `{key}` entry)")
    return sorted(set(missing))


def _real_block() -> str:
    return tree_block((REPO / "CONTRIBUTING.md").read_text(encoding="utf-8"))


def test_the_tree_names_every_module() -> None:
    missing = unnamed(SRC, _real_block(), SUBCOMMANDS)
    assert not missing, "CONTRIBUTING.md's tree does not name: " + ", ".join(missing)


def test_every_module_the_tree_names_exists() -> None:
    missing = gone(SRC, REPO, _real_block())
    assert not missing, "CONTRIBUTING.md's tree names modules that do not exist: " + ", ".join(missing)


def test_the_rule_catches_a_new_module_and_a_deleted_one(tmp_path: Path) -> None:
    for name in ("top.py", "pkg/__init__.py", "pkg/known.py", "pkg/state.py", "pkg/sub/__init__.py",
                 "pkg/sub/deep.py", "pkg/sub/known.py", "cli/__init__.py", "cli/go.py", "other/__init__.py",
                 "other/live.py"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("", encoding="utf-8")
    block = (
        "src/steerable/\n"
        "  top.py       the top\n"
        "  pkg/         known.py (named once for two modules), the state in words, deep.py,\n"
        "               other/live.py (a path), gone.py (deleted)\n"
        "  cli/         one module per subcommand\n"
        "  other/       nothing named\n"
    )
    assert unnamed(tmp_path, block, {"go"}) == [
        "other/live.py (as `live.py` in the `other/` entry)",
        "pkg/known.py (as `known.py` in the `pkg/` entry)",
        "pkg/state.py (as `state.py` in the `pkg/` entry)",
        "pkg/sub/ (as `sub/` in the `pkg/` entry)",
        "pkg/sub/known.py (as `known.py` in the `pkg/` entry)",
    ]
    assert gone(tmp_path, tmp_path, block) == ["gone.py (in the `pkg/` entry)"]
