"""What LeRobot's loaders read in a policy checkpoint: the config's `type`, and the processor files.

A checkpoint's `config.json` is, since format 2, the LeRobot policy config of type
`steerable_hierarchical`: `type`, `format`, every `PolicyConfig` setting at the top level and
`trained_on`. LeRobot's parser fills its own settings (device, features, ...) from their defaults and
writes them all when LeRobot saves the policy; steerable reads the `PolicyConfig` settings and ignores
the rest. Format 1 (before LeRobot could read a checkpoint) nested the settings under `policy`; it
still loads. The processor files are LeRobot's pipeline configs: rename, batch, device and an
identity (un)normaliser, the steps LeRobot's scripts pass overrides to; normalisation itself happens
inside the policy (`stats.json`), the same in `steerable run` and in LeRobot. Torch- and lerobot-free:
`steerable train` writes these files without LeRobot installed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from steerable.errors import ConfigError
from steerable.policy.config import PolicyConfig

__all__ = [
    "FORMAT",
    "FORMATS",
    "IDENTITY_NORMALIZATION",
    "LEROBOT_TYPE",
    "checkpoint_config",
    "policy_settings",
    "processor_configs",
]

LEROBOT_TYPE = "steerable_hierarchical"
FORMAT = 2
FORMATS = (1, 2)
PREPROCESSOR = "policy_preprocessor"
POSTPROCESSOR = "policy_postprocessor"
# LeRobot's feature types; all pass through LeRobot's normaliser unchanged.
IDENTITY_NORMALIZATION = {kind: "IDENTITY" for kind in ("VISUAL", "STATE", "ENV", "ACTION")}


def checkpoint_config(cfg: PolicyConfig, trained_on: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The `config.json` of a checkpoint of `cfg` (format 2), as steerable writes it."""
    config: dict[str, Any] = {"type": LEROBOT_TYPE, "format": FORMAT, **cfg.to_dict()}
    config["normalization_mapping"] = dict(IDENTITY_NORMALIZATION)
    config["trained_on"] = {str(k): str(v) for k, v in (trained_on or {}).items()}
    return config


def policy_settings(config: Mapping[str, Any], where: object = "config.json") -> dict[str, Any]:
    """The `PolicyConfig` settings of a checkpoint's `config.json`, format 1 or 2 (`where` names it)."""
    found = config.get("format")
    if found not in FORMATS:
        raise ConfigError(f"{where} has format {found!r}; this steerable reads formats {FORMATS}")
    if found == 1:
        return dict(config["policy"])
    names = {f.name for f in dataclasses.fields(PolicyConfig)}
    return {k: v for k, v in config.items() if k in names}


def _normalizer(name: str) -> dict[str, Any]:
    return {"registry_name": name,
            "config": {"eps": 1e-8, "features": {}, "norm_map": dict(IDENTITY_NORMALIZATION)}}


def _device(device: str) -> dict[str, Any]:
    return {"registry_name": "device_processor", "config": {"device": device, "float_dtype": None}}


def processor_configs(device: str = "cpu") -> dict[str, dict[str, Any]]:
    """File name -> LeRobot pipeline config of the policy's pre- and post-processor (what
    `make_pre_post_processors(pretrained_path=...)` loads)."""
    pre = [{"registry_name": "rename_observations_processor", "config": {"rename_map": {}}},
           {"registry_name": "to_batch_processor", "config": {}},
           _device(device), _normalizer("normalizer_processor")]
    post = [_normalizer("unnormalizer_processor"), _device("cpu")]
    return {f"{PREPROCESSOR}.json": {"name": PREPROCESSOR, "steps": pre},
            f"{POSTPROCESSOR}.json": {"name": POSTPROCESSOR, "steps": post}}
