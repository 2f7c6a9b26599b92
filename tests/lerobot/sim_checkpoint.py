"""A tiny LeRobot ACT for the simulator's features, built from a config alone (no dataset): random
weights, normalisation stats in the simulator's units, saved as LeRobot's `save_pretrained` saves a
policy and its processors. Cheap (about a second): for tests that need a checkpoint, not training."""

from __future__ import annotations

import json
from pathlib import Path

STATE_NAMES = ("ee.x", "ee.y", "ee.z", "gripper.closure")  # the simulator's state and action names
CAMERA = "observation.images.top"


def tiny_act(out: Path) -> Path:
    """The checkpoint folder `out` (config.json, weights, processors) of an ACT reading the state and
    the top camera, writing the 4 actions."""
    import torch
    from lerobot.configs.types import FeatureType, PolicyFeature
    from lerobot.policies.factory import get_policy_class, make_policy_config, make_pre_post_processors

    from steerable.synthetic.env import SimEnv

    h, w, _ = SimEnv(fps=15).camera_shapes()[CAMERA]
    cfg = make_policy_config(
        "act", device="cpu", chunk_size=10, n_action_steps=5, dim_model=32, n_heads=2, dim_feedforward=64,
        n_encoder_layers=1, n_decoder_layers=1, latent_dim=8, n_vae_encoder_layers=1, use_vae=False,
        pretrained_backbone_weights=None,
        input_features={"observation.state": PolicyFeature(FeatureType.STATE, (4,)),
                        CAMERA: PolicyFeature(FeatureType.VISUAL, (3, h, w))},
        output_features={"action": PolicyFeature(FeatureType.ACTION, (4,))},
    )
    torch.manual_seed(0)
    policy = get_policy_class("act")(cfg)
    mean, std = torch.tensor([0.3, 0.2, 0.15, 0.5]), torch.tensor([0.1, 0.1, 0.05, 0.3])
    vector = {"mean": mean, "std": std, "min": mean - 3 * std, "max": mean + 3 * std}
    image = {k: torch.full((3, 1, 1), v) for k, v in (("mean", 0.5), ("std", 0.25), ("min", 0.0), ("max", 1.0))}
    pre, post = make_pre_post_processors(cfg, dataset_stats={"observation.state": vector, "action": vector,
                                                             CAMERA: image})
    for part in (policy, pre, post):
        part.save_pretrained(out)
    return out


def dataset_meta(root: Path, names: tuple[str, ...] = STATE_NAMES) -> Path:
    """A dataset folder holding only the `meta/info.json` that names the policy's state and actions."""
    (root / "meta").mkdir(parents=True, exist_ok=True)
    features = {key: {"dtype": "float32", "shape": [len(names)], "names": list(names)}
                for key in ("observation.state", "action")}
    (root / "meta" / "info.json").write_text(json.dumps({"codebase_version": "v3.0", "fps": 15,
                                                        "features": features}))
    return root
