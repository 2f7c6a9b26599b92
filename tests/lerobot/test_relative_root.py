"""A checkpoint trained with a relative `--dataset.root`, run from another folder (#34, item 18).

The names of a LeRobot policy's state and action dimensions are in its training dataset's
`meta/info.json`, which the checkpoint's `train_config.json` names by `root`. A relative root is
relative to the folder training ran in: it is found from the checkpoint's own path (which ends with
the config's relative `output_dir`), then from each folder above the checkpoint; found nowhere, the
run is refused in one line naming `--lerobot.dataset`, instead of running on assumed names.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from lerobot.configs.default import DatasetConfig
from lerobot.configs.policies import PreTrainedConfig
from lerobot.configs.train import TrainPipelineConfig
from sim_checkpoint import STATE_NAMES, dataset_meta, tiny_act

from steerable.errors import ConfigError
from steerable.runtime.lerobot.policy import load_lerobot_policy
from steerable.synthetic.env import SimEnv

ROOT = "data/sim"  # as typed: lerobot-train --dataset.root=data/sim --output_dir=outputs/train/act_sim
OUTPUT_DIR = "outputs/train/act_sim"
REVERSED = tuple(reversed(STATE_NAMES))  # the dataset's order: only its names map the actions right


def _trained_in(folder: Path) -> Path:
    """What `lerobot-train` run in `folder` leaves: the dataset under it, and the checkpoint under its
    output_dir, with `checkpoints/last` a link to the last step. Returns the checkpoint as a user
    names it (through `last`)."""
    dataset_meta(folder / ROOT, REVERSED)
    step = folder / OUTPUT_DIR / "checkpoints" / "000002" / "pretrained_model"
    tiny_act(step)
    TrainPipelineConfig(dataset=DatasetConfig(repo_id="local/sim", root=ROOT), output_dir=Path(OUTPUT_DIR),
                        policy=PreTrainedConfig.from_pretrained(step)).save_pretrained(step)
    (folder / OUTPUT_DIR / "checkpoints" / "last").symlink_to("000002")
    return folder / OUTPUT_DIR / "checkpoints" / "last" / "pretrained_model"


@pytest.fixture
def elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Run from a folder that is not the training one; LeRobot's dataset home empty."""
    monkeypatch.setenv("HF_LEROBOT_HOME", str(tmp_path / "lerobot_home"))
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    return tmp_path / "elsewhere"


def _env() -> SimEnv:
    env = SimEnv(fps=15)
    env.reset(0)
    return env


def _action_index(ckpt: Path) -> tuple[int, ...]:
    low = load_lerobot_policy(str(ckpt), _env())
    assert low.features.named
    return low.features.action_index


def test_the_root_is_found_from_the_checkpoints_path(tmp_path: Path, elsewhere: Path) -> None:
    ckpt = _trained_in(tmp_path / "project")
    # Named by the dataset, reversed: the environment's action i is the policy's output 3 - i.
    assert _action_index(ckpt) == (3, 2, 1, 0)
    assert _action_index(ckpt.resolve()) == (3, 2, 1, 0)  # through the link or not
    # From a relative checkpoint path too.
    assert _action_index(Path("..") / ckpt.relative_to(tmp_path)) == (3, 2, 1, 0)


def test_a_checkpoint_moved_beside_its_dataset(tmp_path: Path, elsewhere: Path) -> None:
    ckpt = _trained_in(tmp_path / "project")
    moved = tmp_path / "copy" / "models" / "act"
    shutil.copytree(ckpt, moved)
    dataset_meta(tmp_path / "copy" / ROOT, REVERSED)  # copy/data/sim: relative to a folder above it
    assert _action_index(moved) == (3, 2, 1, 0)


def test_a_root_found_nowhere_is_one_line_naming_the_flag(tmp_path: Path, elsewhere: Path) -> None:
    ckpt = _trained_in(tmp_path / "project")
    shutil.rmtree(tmp_path / "project" / "data")
    with pytest.raises(ConfigError) as caught:
        load_lerobot_policy(str(ckpt), _env())
    message = str(caught.value)
    assert f"dataset at {ROOT}" in message and "--lerobot.dataset" in message and "\n" not in message
    # Named, it runs.
    named = dataset_meta(tmp_path / "named", REVERSED)
    low = load_lerobot_policy(str(ckpt), _env(), dataset=str(named))
    assert low.features.named and low.features.action_index == (3, 2, 1, 0)
