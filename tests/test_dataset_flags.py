"""One spelling for the dataset and episode selection across commands, old spellings kept as aliases."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from annotate_helpers import make_synthetic, steerable
from steerable.annotate.config import AnnotateConfig
from steerable.cli.flags import parse_config
from steerable.cli.options import parse_episodes
from steerable.errors import ConfigError


def _annotate(argv: list[str]) -> AnnotateConfig:
    return parse_config(AnnotateConfig, argv)


def test_annotate_reads_the_dataset_and_episode_spellings_of_every_command() -> None:
    """`annotate --dataset D --episodes L`: a remote D is its repo_id, L its only_episodes (ranges expanded)."""
    cfg = _annotate(["--dataset", "user/remote", "--episodes", "0,3"])
    assert (cfg.root, cfg.repo_id, cfg.only_episodes) == (None, "user/remote", [0, 3])
    assert _annotate(["user/remote", "--only_episodes=7-9"]).only_episodes == [7, 8, 9]
    assert "dataset" not in _annotate(["user/remote"]).model_dump()  # read into repo_id, not kept twice


@pytest.mark.parametrize("flag", ["--episodes", "--only_episodes"])
@pytest.mark.parametrize(("model", "rest"), [
    ("steerable.policy.settings:TrainSettings", ["--dataset", "D", "--output_dir", "o"]),
    ("steerable.runtime.settings:RunSettings", ["--replay", "D"]),
])
def test_train_and_run_read_both_episode_spellings_with_ranges(model: str, rest: list[str], flag: str) -> None:
    from importlib import import_module

    module, _, name = model.partition(":")
    cfg = parse_config(getattr(import_module(module), name), [*rest, flag, "1-3,5"])
    assert cfg.episodes == [1, 2, 3, 5]


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
    for argv in (["--dataset", str(tmp_path)], [str(tmp_path), "--vlm.model_id", "m"], ["--root", str(tmp_path)]):
        cfg = _annotate(argv)
        assert (cfg.root, cfg.repo_id) == (tmp_path, None)
    assert _annotate([str(tmp_path), "--vlm.model_id", "m"]).vlm.model_id == "m"
    with pytest.raises(ConfigError, match="name the dataset once"):
        _annotate([str(tmp_path), "--root", str(tmp_path / "other")])
    with pytest.raises(ConfigError, match="--episodes takes episode indices"):
        _annotate([str(tmp_path), "--only_episodes", "3-1"])


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


def test_a_flag_replaces_the_config_files_value_under_either_name(tmp_path: Path) -> None:
    """annotate's field is only_episodes: a file's `episodes:` is the same setting, and a flag wins over it."""
    config = tmp_path / "c.yaml"
    config.write_text(f"root: {tmp_path}\nepisodes: [0]\n")
    assert _annotate(["--config", str(config)]).only_episodes == [0]
    assert _annotate(["--config", str(config), "--only_episodes", "1-2"]).only_episodes == [1, 2]
    run = tmp_path / "run.yaml"
    run.write_text("replay: D\nonly_episodes: 4\nvlm: {timeout_s: 5}\n")
    from steerable.runtime.settings import RunSettings

    cfg = parse_config(RunSettings, ["--config", str(run), "--vlm.request_timeout_s", "7", "--episodes", "5-6"])
    assert (cfg.episodes, cfg.vlm.request_timeout_s) == ([5, 6], 7)
