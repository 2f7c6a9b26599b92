"""One command-line style for every command: `--config FILE.yaml`, and a mistyped flag answered in
one line naming the closest one, with exit status 2 (steerable.cli.flags reads every command)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from steerable.cli.main import SUBCOMMANDS, main

COMMANDS = [m.replace("_", "-") for m in SUBCOMMANDS if m != "recipes"]
COMMANDS += ["recipes list", "recipes show", "recipes lint", "recipes export"]


def _flags(command: list[str], capsys: pytest.CaptureFixture[str], *, positional: bool = False) -> list[str]:
    """The command's flags, as its --help lists them (with `positional`, its DATASET... too, as keys)."""
    assert main([*command, "--help"]) == 0
    shown = capsys.readouterr().out
    listed = re.findall(r"^ {2}--([a-z_.]+)", shown, flags=re.MULTILINE)
    words = re.findall(r"^ {2}([A-Z_]+) ", shown, flags=re.MULTILINE) if positional else []
    return [flag for flag in listed if flag != "config"] + [w.lower() for w in words]


def _typo(flag: str) -> str:
    """`flag` with two different letters of its last part swapped (`revision` -> `rveision`)."""
    head, dot, last = flag.rpartition(".")
    i = next(i for i in range(1, len(last) - 1) if last[i] != last[i + 1])
    return f"{head}{dot}{last[:i]}{last[i + 1]}{last[i]}{last[i + 2:]}"


def _error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    status = main(argv)
    err = capsys.readouterr().err.strip()
    assert status == 2, err
    assert "\n" not in err and err.startswith("steerable: error: "), err
    return err


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_answers_a_mistyped_flag_with_the_closest_one(command: str,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    words = command.split()
    flags = [f for f in _flags(words, capsys) if len(f.rpartition(".")[2]) >= 5]
    if not flags:  # `recipes list` has no option: a flag is unknown, with a pointer to --help
        assert _error([*words, "--verbose"], capsys).endswith("unknown option --verbose (see --help for every option)")
        return
    flag = max(flags, key=len)
    wrong = _typo(flag)
    assert _error([*words, f"--{wrong}=1"], capsys).endswith(f"unknown option --{wrong} (did you mean --{flag}?)")


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_reads_a_config_file(command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    words = command.split()
    flags = [f for f in _flags(words, capsys, positional=True) if "." not in f and len(f) >= 4]
    if not flags:
        config = tmp_path / "empty.yaml"
        config.write_text("")
        assert main([*words, "--config", str(config)]) == 0  # read, and nothing in it to refuse
        return
    flag = max(flags, key=len)
    config = tmp_path / "typo.yaml"
    config.write_text(f"{_typo(flag)}: 1\n")
    assert f"unknown key {_typo(flag)} (did you mean {flag}?)" in _error([*words, "--config", str(config)], capsys)


def test_words_repeats_pairs_and_optional_values_read_as_argparse_read_them() -> None:
    from typing import ClassVar

    from pydantic import Field

    from steerable.cli.flags import parse_config
    from steerable.errors import ConfigError
    from steerable.settings import Settings

    class Words(Settings):
        positional: ClassVar[tuple[str, ...]] = ("name", "other")
        name: str
        other: str | None = None
        on: bool = False
        tag: list[str] = Field([], json_schema_extra={"repeat": True})
        pair: list[str] | None = Field(None, json_schema_extra={"nargs": 2})
        maybe: str | None = Field(None, json_schema_extra={"bare": ""})

    got = parse_config(Words, ["--on", "a", "--tag", "x,y", "--tag=z", "--pair", "p", "q", "b", "--maybe"])
    assert (got.name, got.other, got.on, got.tag, got.pair, got.maybe) == ("a", "b", True, ["x,y", "z"], ["p", "q"], "")
    assert parse_config(Words, ["--on", "false", "a", "--maybe", "m"]).model_dump(include={"on", "maybe"}) == {
        "on": False, "maybe": "m"}
    for argv, message in ((["a", "b", "c"], "unexpected argument 'c' (takes NAME, OTHER)"),
                          (["a", "--pair", "p"], "--pair takes 2 values"), ([], "NAME is required (also --name)"),
                          (["a", "--name", "b"], "name the name once; got NAME a, --name b")):
        with pytest.raises(ConfigError, match=re.escape(message)):
            parse_config(Words, argv)
