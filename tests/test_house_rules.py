"""House rules that `make test` checks beside ruff, mypy and the import contracts: no module in src/
over 400 lines (a module that grows past it is split by job), and the plugins' lines within ruff's
configured length (`make test` runs ruff on src, tests and benchmarks only), and the test files that start a
Ray cluster on one of `make test`'s two workers."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import steerable

SRC = Path(steerable.__file__).parent
ROOT = SRC.parent.parent
MAX_MODULE_LINES = 400


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def test_no_module_in_src_is_over_400_lines() -> None:
    over = {str(p.relative_to(ROOT)): n for p in sorted(SRC.rglob("*.py")) if (n := len(_lines(p))) > MAX_MODULE_LINES}
    assert not over, f"modules over {MAX_MODULE_LINES} lines (split each by job): {over}"


def test_the_plugins_lines_fit_ruffs_line_length() -> None:
    tomllib = pytest.importorskip("tomllib", reason="tomllib is in the standard library from Python 3.11")
    with (ROOT / "pyproject.toml").open("rb") as fh:
        length = int(tomllib.load(fh)["tool"]["ruff"]["line-length"])
    plugins = [p for p in sorted((ROOT / "plugins").rglob("*.py")) if "build" not in p.relative_to(ROOT).parts]
    assert plugins, "no plugin sources found"
    long = [f"{p.relative_to(ROOT)}:{i}" for p in plugins for i, line in enumerate(_lines(p), 1) if len(line) > length]
    assert not long, f"lines over {length} characters: {long}"


def test_every_file_that_starts_a_ray_cluster_shares_the_ray_worker() -> None:
    """`make test` runs two workers, a file's tests on one (tests/conftest.py); two local Ray clusters at once
    would race for the machine's ports and CPUs, so every file that starts one names the group "ray"."""
    starts = re.compile(r'"--executor\.backend",\s*"ray"|^import ray$', re.M)
    files = [p for p in sorted((ROOT / "tests").glob("test_*.py")) if starts.search(p.read_text(encoding="utf-8"))]
    assert len(files) >= 3, files  # the rule's own check: the pattern still finds the Ray files
    ungrouped = [p.name for p in files if 'pytestmark = pytest.mark.xdist_group("ray")' not in p.read_text("utf-8")]
    assert not ungrouped, f"files that start a Ray cluster without the shared group: {ungrouped}"
