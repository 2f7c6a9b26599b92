"""`steerable make-dataset` reads its options as the other commands do (#34, item 14): `--output_dir`
is `--out` under the other commands' name, and a mistyped option is one did-you-mean line, exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from steerable.cli.main import main


def test_output_dir_is_another_name_for_out(tmp_path: Path) -> None:
    for flag, name in (("--output_dir", "a"), ("--out", "b"), ("--output_dir=", "c")):
        given = [flag + str(tmp_path / name)] if flag.endswith("=") else [flag, str(tmp_path / name)]
        assert main(["make-dataset", "synthetic", *given, "--episodes", "1", "--cameras", "top",
                     "--difficulty", "easy"]) == 0
        info = json.loads((tmp_path / name / "meta" / "info.json").read_text())
        assert info["total_episodes"] == 1 and "observation.images.top" in info["features"]


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (["--out", "DS", "--episodse", "2"], "unknown option --episodse (did you mean --episodes?)"),
        (["--output_dri", "DS"], "unknown option --output_dri (did you mean --output_dir?)"),
        (["--out", "DS", "--with_langauge"], "unknown option --with_langauge (did you mean --with_language?)"),
        (["--episodes", "1"], "--out is required"),
    ],
)
def test_a_wrong_option_is_one_line_with_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str],
                                                line: str) -> None:
    argv = [str(tmp_path / "ds") if a == "DS" else a for a in argv]
    assert main(["make-dataset", "synthetic", *argv]) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("steerable: error: ") and line in lines[0], captured.err
    assert "usage:" not in captured.err + captured.out
    assert not (tmp_path / "ds").exists()


def test_the_kind_is_required_and_checked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for kind in ([], ["real"]):
        assert main(["make-dataset", *kind, "--out", str(tmp_path / "ds")]) == 2
        lines = capsys.readouterr().err.strip().splitlines()
        assert len(lines) == 1 and "steerable make-dataset synthetic --out DIR" in lines[0]
    assert not (tmp_path / "ds").exists()


def test_help_lists_both_spellings(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["make-dataset", "--help"]) == 0
    shown = capsys.readouterr().out
    assert "--out (required) (or --output_dir)" in shown and "--episodes=20" in shown
