"""`--low_level lerobot` loads a policy from an installed LeRobot plugin (#34, item 15).

LeRobot's scripts import every installed `lerobot_policy_*` distribution before they build a policy,
so a plugin's policy type is registered; steerable does the same. The plugin here is a throwaway
distribution written into a temporary folder (a package beside a minimal `.dist-info`, the folder on
`sys.path`: what `importlib.metadata`, and so LeRobot, finds). Its checkpoint is written without
importing the plugin, so only steerable's loader can have registered it. A type no installed plugin
registers is one line naming the type and the distribution that likely provides it.
"""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch
from lerobot.configs.types import FeatureType, NormalizationMode, PolicyFeature
from lerobot.policies.factory import make_policy_config
from lerobot.processor import make_default_pre_post_processors
from safetensors.torch import save_file

from steerable.cli.main import main
from steerable.errors import ConfigError
from steerable.runtime.lerobot.policy import load_lerobot_policy
from steerable.synthetic.env import SimEnv

NAME = "tinyecho34"  # a policy type no other test registers
DIST = f"lerobot_policy_{NAME}"
GAIN = 0.5

CONFIGURATION = f'''
from dataclasses import dataclass, field

from lerobot.configs import PreTrainedConfig
from lerobot.configs.types import NormalizationMode
from lerobot.optim import AdamWConfig


@PreTrainedConfig.register_subclass("{NAME}")
@dataclass
class Tinyecho34Config(PreTrainedConfig):
    gain: float = 1.0
    normalization_mapping: dict = field(default_factory=lambda: {{
        "STATE": NormalizationMode.IDENTITY, "ACTION": NormalizationMode.IDENTITY}})

    @property
    def observation_delta_indices(self):
        return None

    @property
    def action_delta_indices(self):
        return None

    @property
    def reward_delta_indices(self):
        return None

    def get_optimizer_preset(self):
        return AdamWConfig(lr=1e-3)

    def get_scheduler_preset(self):
        return None

    def validate_features(self):
        pass
'''

MODELING = '''
import torch
from lerobot.policies.pretrained import PreTrainedPolicy

from .configuration_tinyecho34 import Tinyecho34Config


class Tinyecho34Policy(PreTrainedPolicy):
    """Its action is the state times a learned gain."""

    config_class = Tinyecho34Config
    name = "tinyecho34"

    def __init__(self, config, **kwargs):
        super().__init__(config)
        self.gain = torch.nn.Parameter(torch.tensor(float(config.gain)))

    def get_optim_params(self):
        return self.parameters()

    def reset(self):
        pass

    def forward(self, batch):
        raise NotImplementedError

    def predict_action_chunk(self, batch, **kwargs):
        return self.select_action(batch)[:, None]

    def select_action(self, batch, **kwargs):
        return batch["observation.state"] * self.gain
'''


def _site(root: Path) -> Path:
    """The plugin as pip leaves an installed distribution: its package beside its `.dist-info`."""
    package = root / DIST
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(f"from .configuration_{NAME} import Tinyecho34Config\n"
                                         f"from .modeling_{NAME} import Tinyecho34Policy\n")
    (package / f"configuration_{NAME}.py").write_text(CONFIGURATION)
    (package / f"modeling_{NAME}.py").write_text(MODELING)
    meta = root / f"{DIST}-0.0.1.dist-info"
    meta.mkdir()
    (meta / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {DIST}\nVersion: 0.0.1\n")
    return root


def _checkpoint(out: Path, kind: str = NAME) -> Path:
    """A checkpoint of policy type `kind` as `save_pretrained` leaves one: config.json, the weights, and
    LeRobot's default processors (identity normalisers; made from a built-in config of the same features:
    the files name no policy type)."""
    features = {"input_features": {"observation.state": PolicyFeature(FeatureType.STATE, (4,))},
                "output_features": {"action": PolicyFeature(FeatureType.ACTION, (4,))}}
    stand_in = make_policy_config("act", device="cpu", **features, normalization_mapping={
        "STATE": NormalizationMode.IDENTITY, "ACTION": NormalizationMode.IDENTITY})
    pre, post = make_default_pre_post_processors(stand_in, None)
    out.mkdir(parents=True)
    pre.save_pretrained(out)
    post.save_pretrained(out)
    config = {"type": kind, "device": "cpu", "gain": GAIN,
              **{key: {k: {"type": f.type.name, "shape": list(f.shape)} for k, f in value.items()}
                 for key, value in features.items()}}
    (out / "config.json").write_text(json.dumps(config))
    save_file({"gain": torch.tensor(1.0)}, str(out / "model.safetensors"))  # the loaded gain: 1.0, not GAIN
    return out


@pytest.fixture
def installed(tmp_path: Path) -> Iterator[Path]:
    site = _site(tmp_path / "site")
    sys.path.insert(0, str(site))
    importlib.invalidate_caches()
    yield site
    sys.path.remove(str(site))
    importlib.invalidate_caches()


def test_a_policy_from_an_installed_plugin_loads_and_acts(installed: Path, tmp_path: Path) -> None:
    assert DIST not in sys.modules  # nothing imported it yet: steerable's loader must
    ckpt = _checkpoint(tmp_path / "ckpt")
    env = SimEnv(fps=15)
    env.reset(0)
    low = load_lerobot_policy(str(ckpt), env)
    assert low.name == f"LeRobot {NAME} policy"
    observation = env.observe()
    actions = low.act(observation, "pick up the red cube").actions
    np.testing.assert_allclose(actions[0], observation.state, rtol=0, atol=1e-6)  # the saved gain, 1.0


def test_an_unknown_policy_type_names_the_missing_plugin(tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    ckpt = _checkpoint(tmp_path / "ckpt", kind="nosuchpolicy")
    env = SimEnv(fps=15)
    env.reset(0)
    with pytest.raises(ConfigError) as caught:
        load_lerobot_policy(str(ckpt), env)
    message = str(caught.value)
    assert "'nosuchpolicy'" in message and "pip install lerobot_policy_nosuchpolicy" in message
    assert "\n" not in message and "Available" not in message and "<class" not in message
    (tmp_path / "none.txt").write_text("/status\n")
    code = main(["run", "--high_level", "none", "--low_level", "lerobot", "--lerobot.policy_path", str(ckpt),
                 "--task", "pick up the red cube", "--commands", str(tmp_path / "none.txt")])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("steerable: error: ") and "lerobot_policy_nosuchpolicy" in err
