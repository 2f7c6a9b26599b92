"""Every extra an error message tells the user to install exists, and `steerable[all]` has them all."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

import steerable

SRC = Path(steerable.__file__).parent
PYPROJECT = SRC.parent.parent / "pyproject.toml"
_NAMED = re.compile(r"steerable\[([\w,-]+)\]")
NOT_FOR_USERS = {"test", "test-lerobot", "all"}


def _extras() -> dict[str, list[str]]:
    tomllib = pytest.importorskip("tomllib", reason="tomllib is in the standard library from Python 3.11")
    with PYPROJECT.open("rb") as fh:
        extras: dict[str, list[str]] = tomllib.load(fh)["project"]["optional-dependencies"]
    return extras


def _named_in_src() -> dict[str, set[str]]:
    """extra -> the modules naming it: `steerable[x]` in a string, or `MissingExtraError(package, "x")`."""
    named: dict[str, set[str]] = {}
    for path in sorted(SRC.rglob("*.py")):
        module = ".".join(path.relative_to(SRC).with_suffix("").parts)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            found: list[str] = []
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                found = [e for group in _NAMED.findall(node.value) for e in group.split(",")]
            elif isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) == (
                "MissingExtraError"
            ):
                args = [*node.args[1:2], *(k.value for k in node.keywords if k.arg == "extra")]
                found = [a.value for a in args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            for extra in found:
                named.setdefault(extra.strip(), set()).add(module)
    return named


def test_every_extra_named_in_a_message_exists() -> None:
    extras, named = _extras(), _named_in_src()
    assert {"policy", "train", "rerun"} <= set(named)  # the scan finds both spellings
    unknown = {extra: sorted(where) for extra, where in named.items() if extra not in extras}
    assert not unknown, f"these messages name extras pyproject.toml does not define: {unknown}"


def test_all_installs_every_user_extra() -> None:
    extras = _extras()
    (spec,) = extras["all"]
    match = re.fullmatch(r"steerable\[([\w,-]+)\]", spec)
    assert match, spec
    assert set(match[1].split(",")) == set(extras) - NOT_FOR_USERS


def test_a_policy_name_without_torch_names_the_policy_extra() -> None:
    code = (
        "import sys; sys.modules['torch'] = None; import steerable.policy as p\n"
        "try:\n    p.load_policy\nexcept ImportError as e:\n    print(type(e).__name__, e)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("MissingExtraError") and "steerable[policy]" in out.stdout, out.stdout


def test_the_lerobot_extra_requires_every_plugin_at_steerables_version() -> None:
    """The plugins in plugins/ are released with steerable: each one's version is steerable's, it pins
    steerable to that version, and the `lerobot` extra requires it at that version."""
    tomllib = pytest.importorskip("tomllib", reason="tomllib is in the standard library from Python 3.11")
    with PYPROJECT.open("rb") as fh:
        version = tomllib.load(fh)["project"]["version"]
    extra = " ".join(_extras()["lerobot"])
    plugins = sorted((PYPROJECT.parent / "plugins").glob("*/pyproject.toml"))
    assert len(plugins) == 2
    for path in plugins:
        with path.open("rb") as fh:
            project = tomllib.load(fh)["project"]
        assert project["version"] == version, path
        assert any(re.fullmatch(rf"steerable(\[\w+\])?=={re.escape(version)}", d) for d in project["dependencies"])
        assert f"{project['name']}=={version}; python_version >= '3.12'" in extra, project["name"]
