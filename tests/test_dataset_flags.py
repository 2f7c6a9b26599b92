"""One spelling for the dataset and episode selection across commands, old spellings kept as aliases."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from annotate_helpers import make_synthetic, steerable
from steerable.cli._dataset_args import normalize_aliases
from steerable.cli.options import parse_episodes
from steerable.errors import ConfigError


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["eval", "D", "--json"], ["eval", "D", "--json"]),  # already the one spelling
        (["annotate", "--dataset", "user/remote", "--episodes", "0,3"],
         ["annotate", "--repo_id", "user/remote", "--only_episodes", "0,3"]),
        (["train", "--dataset", "D"], ["train", "--dataset", "D"]),  # its own spelling
        (["demo", "--episodes", "3"], ["demo", "--episodes", "3"]),  # a count, not a selection
        (["recipes", "lint", "x", "--dataset", "D"], ["recipes", "lint", "x", "--dataset", "D"]),
    ],
)
def test_aliases_are_rewritten_to_each_commands_spelling(argv: list[str], expected: list[str]) -> None:
    assert normalize_aliases(argv) == expected


SPELLINGS = (["D"], ["--dataset", "D"], ["--root=D"], ["--repo_id", "D"])


@pytest.mark.parametrize("spelling", SPELLINGS)
@pytest.mark.parametrize(("model", "rest"), [
    ("steerable.cli.info:InfoSettings", []),
    ("steerable.cli.sheets:SheetsSettings", ["--episode", "2", "--out", "o"]),
    ("steerable.cli.view:ViewSettings", []),
    ("steerable.cli.render:RenderSettings", ["--recipe", "r", "--all"]),
    ("steerable.cli.export:ExportSettings", ["--recipe", "r", "--out", "o", "--only_episodes", "0,2"]),
    ("steerable.cli.eval:EvalSettings", ["--json"]),
])
def test_every_dataset_spelling_fills_the_one_field(model: str, rest: list[str], spelling: list[str]) -> None:
    from importlib import import_module

    from steerable.cli.flags import parse_config

    module, _, name = model.partition(":")
    assert parse_config(getattr(import_module(module), name), [*spelling, *rest]).dataset == "D"


@pytest.mark.parametrize("spelling", (["--episodes", "1-3,5"], ["--only_episodes=1-3,5"]))
def test_both_episode_spellings_read_ranges(spelling: list[str]) -> None:
    from steerable.cli.flags import parse_config
    from steerable.cli.view import ViewSettings

    assert parse_config(ViewSettings, ["D", *spelling]).episodes == [1, 2, 3, 5]


def test_annotate_dataset_alias_picks_root_for_a_local_folder(tmp_path: Path) -> None:
    assert normalize_aliases(["annotate", "--dataset", str(tmp_path)]) == ["annotate", "--root", str(tmp_path)]
    assert normalize_aliases(["annotate", str(tmp_path), "--vlm.model_id", "m"]) == [
        "annotate", "--root", str(tmp_path), "--vlm.model_id", "m"]
    assert normalize_aliases(["annotate", "--root", str(tmp_path)]) == ["annotate", "--root", str(tmp_path)]


def test_episode_lists_and_ranges() -> None:
    assert parse_episodes("0,3,7-9,3") == [0, 3, 7, 8, 9]
    assert parse_episodes(None) is None
    for bad in ("a", "3-1", "-1", ","):
        with pytest.raises(ConfigError, match="--episodes"):
            parse_episodes(bad)


def test_every_spelling_selects_the_same_frames_from_the_command_line(tmp_path: Path) -> None:
    root = str(make_synthetic(tmp_path / "ds", episodes=3))
    outputs = set()
    for args in ([root, "--episodes", "0,2"], ["--dataset", root, "--only_episodes", "0,2"]):
        result = steerable("render", *args, "--recipe", "subtask_joint", "--json", "--fallback", "task")
        assert result.returncode == 0, result.stderr
        lines = [json.loads(x) for x in result.stdout.splitlines()]
        assert {x["episode_index"] for x in lines} == {0, 2}
        outputs.add(result.stdout)
    assert len(outputs) == 1
    both = steerable("info", "--dataset", root, "--root", str(tmp_path))
    assert both.returncode == 2 and "name the dataset once" in both.stderr
