"""The one way tests reach the real LeRobot fixtures in ../shared/data.

A missing fixture FAILS the test that needs it (a silently skipped test hides a broken checkout or
CI image). Set STEERABLE_SKIP_SHARED_DATA=1 to skip those tests instead, e.g. in a checkout that
deliberately has no shared/ folder beside it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

__all__ = ["OPT_OUT", "SHARED_DATA", "shared_dataset", "shared_path"]

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
OPT_OUT = "STEERABLE_SKIP_SHARED_DATA"


def shared_path(*parts: str) -> Path:
    """`SHARED_DATA / parts`, failing (or, with the opt-out set, skipping) the test when it is absent."""
    path = SHARED_DATA.joinpath(*parts)
    if path.exists():
        return path
    if os.environ.get(OPT_OUT, "") not in ("", "0"):
        pytest.skip(f"shared fixture {path} is absent and {OPT_OUT} is set")
    pytest.fail(
        f"shared fixture {path} is missing: tests need the shared/data folder beside the repository "
        f"(set {OPT_OUT}=1 to skip these tests instead)",
        pytrace=False,
    )


def shared_dataset(name: str) -> Path:
    """The root of the shared LeRobot dataset `name` (read-only), checked by its meta/info.json."""
    shared_path(name, "meta", "info.json")
    return SHARED_DATA / name
