"""The test robot (a LeRobot plugin on a fake motors bus) and a tiny ACT policy for its features.

`plugin_site(root)` makes the plugin in `tests/lerobot/plugins/` an installed distribution, as pip
would leave it: the package beside a minimal `lerobot_robot_mockarm-0.0.1.dist-info`, in a folder
that goes on PYTHONPATH (a subprocess) or `sys.path` (this process), where `importlib.metadata`,
and so LeRobot's `register_third_party_plugins`, finds it. `act_checkpoint` builds an ACT policy
with LeRobot's own classes for the arm's features (random weights, normalisation stats in degrees)
and saves it as LeRobot's trainer does, with a dataset `meta/info.json` naming its features.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

PLUGIN = Path(__file__).parent / "plugins" / "lerobot_robot_mockarm"
DIST = "lerobot_robot_mockarm"
MOTORS = ("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper")
NAMES = tuple(f"{m}.pos" for m in MOTORS)
# The policy's stats, in robot units (degrees; the gripper 0-100): its targets land around the means.
MEAN = (30.0, -20.0, 40.0, 10.0, 0.0, 50.0)
STD = (5.0, 5.0, 5.0, 5.0, 5.0, 5.0)
CAMERA = (24, 32)  # (height, width) of the arm's synthetic camera


def plugin_site(root: Path) -> Path:
    """A folder holding the plugin as an installed distribution (put it on the path)."""
    site = root / "site"
    if not (site / DIST).exists():
        shutil.copytree(PLUGIN, site / DIST, ignore=shutil.ignore_patterns("__pycache__"))
        meta = site / f"{DIST}-0.0.1.dist-info"
        meta.mkdir(parents=True)
        (meta / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {DIST}\nVersion: 0.0.1\n")
    return site


def act_checkpoint(root: Path, *, action_names: tuple[str, ...] = NAMES) -> tuple[Path, Path]:
    """(checkpoint folder, dataset folder): a tiny ACT for the arm's state, camera and action, and the
    `meta/info.json` of the dataset it was 'trained' on (its action names: `action_names`)."""
    import torch
    from lerobot.configs.types import FeatureType, PolicyFeature
    from lerobot.policies.factory import get_policy_class, make_policy_config, make_pre_post_processors

    h, w = CAMERA
    cfg = make_policy_config(
        "act", device="cpu", chunk_size=10, n_action_steps=5, dim_model=32, n_heads=2, dim_feedforward=64,
        n_encoder_layers=1, n_decoder_layers=1, latent_dim=8, n_vae_encoder_layers=1, use_vae=False,
        pretrained_backbone_weights=None,
        input_features={"observation.state": PolicyFeature(FeatureType.STATE, (6,)),
                        "observation.images.front": PolicyFeature(FeatureType.VISUAL, (3, h, w))},
        output_features={"action": PolicyFeature(FeatureType.ACTION, (6,))},
    )
    torch.manual_seed(0)
    policy = get_policy_class("act")(cfg)
    vector = {"mean": torch.tensor(MEAN), "std": torch.tensor(STD), "min": torch.tensor(MEAN) - 20,
              "max": torch.tensor(MEAN) + 20}
    image = {k: torch.full((3, 1, 1), v) for k, v in (("mean", 0.5), ("std", 0.25), ("min", 0.0), ("max", 1.0))}
    stats = {"observation.state": vector, "action": vector, "observation.images.front": image}
    pre, post = make_pre_post_processors(cfg, dataset_stats=stats)
    ckpt = root / "act_mock_arm"
    policy.save_pretrained(ckpt)
    pre.save_pretrained(ckpt)
    post.save_pretrained(ckpt)
    return ckpt, dataset_meta(root / "mock_arm_dataset", action_names)


def dataset_meta(dataset: Path, action_names: tuple[str, ...] = NAMES) -> Path:
    """The `meta/info.json` of a dataset recorded on the arm (what names a policy's features)."""
    h, w = CAMERA
    (dataset / "meta").mkdir(parents=True, exist_ok=True)
    features = {"observation.state": {"dtype": "float32", "shape": [6], "names": list(NAMES)},
                "action": {"dtype": "float32", "shape": [6], "names": list(action_names)},
                "observation.images.front": {"dtype": "video", "shape": [h, w, 3], "names": ["height", "width",
                                                                                              "channels"]}}
    (dataset / "meta" / "info.json").write_text(json.dumps({"codebase_version": "v3.0", "robot_type": "mock_arm",
                                                            "fps": 30, "features": features}))
    return dataset


def read_log(path: Path) -> list[dict[str, Any]]:
    """The plugin robot's calls, in order."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
