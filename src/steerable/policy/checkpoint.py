"""Checkpoints: safetensors weights + JSON config + tokenizer + recipe + normalisation stats, and the
processor files LeRobot reads: one folder loads in `steerable run` and in LeRobot (`lerobot_format`).

A checkpoint folder is written with the folder commit every dataset writer uses
(`steerable.dataset.commit`: built beside its final name, switched in whole), and `latest` (a
one-line file naming the newest checkpoint) is replaced atomically after it, so a crash at any
instant leaves the previous checkpoint whole and `latest` pointing at a complete one; the next
save finishes or drops what a killed one left. Training checkpoints add the optimizer state (safetensors, no pickle) and
`trainer_state.json` (step, data position, RNG state), which is all a resumed run needs.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shutil
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from steerable.dataset.atomic import atomic_write_bytes
from steerable.dataset.commit import commit_folder, recover_folder
from steerable.errors import ConfigError
from steerable.policy.averaging import TRAINING_WEIGHTS
from steerable.policy.backbone import build_backbone
from steerable.policy.config import UNSAVED_BEFORE, PolicyConfig
from steerable.policy.legacy_objects import migrate_objects
from steerable.policy.lerobot_format import checkpoint_config, policy_settings, processor_configs
from steerable.policy.model import HierarchicalPolicy
from steerable.policy.processor import Normalizer, Processor
from steerable.policy.tokenizer import load_tokenizer

__all__ = [
    "CHECKPOINTS", "LATEST", "POINTER_MAX", "LoadedPolicy", "dataset_provenance", "latest_checkpoint", "latest_name",
    "load_optimizer", "load_policy", "read_training_state",
    "save_checkpoint", "trained_on", "write_policy_files",
]

logger = logging.getLogger(__name__)

LATEST = "latest"
CHECKPOINTS = "checkpoints"
POINTER_MAX = 256  # bytes of a `latest` pointer: one folder name


@dataclass
class LoadedPolicy:
    """A policy ready for inference: the network, its processor, and the recipe it was trained on."""

    model: HierarchicalPolicy
    processor: Processor
    recipe_text: str
    path: Path


def save_checkpoint(
    output_dir: Path, step: int, model: HierarchicalPolicy, processor: Processor, recipe_text: str,
    *, optimizer: torch.optim.Optimizer | None = None, trainer_state: Mapping[str, Any] | None = None,
    keep: int = 2, trained_on: Mapping[str, Any] | None = None,
    training_weights: Callable[[Path], None] | None = None,
) -> Path:
    """Write `output_dir/checkpoints/step_XXXXXXXX` atomically, point `latest` at it, prune old ones.
    `training_weights` writes the optimizer's weights to the path it is given when the model holds
    their average (`averaging.WeightAverage`)."""
    root = Path(output_dir) / CHECKPOINTS
    final = root / f"step_{step:08d}"
    _recover_killed_saves(root)
    with commit_folder(final) as tx, _os_errors_of_safetensors():
        write_policy_files(tx.root, model, processor, recipe_text, checkpoint_config(model.cfg, trained_on),
                           file=tx.file)
        if optimizer is not None:
            _save_optimizer(optimizer, tx.root)
        if training_weights is not None:
            training_weights(tx.file(TRAINING_WEIGHTS))
        if trainer_state is not None:
            state = {**trainer_state, "step": step}
            tx.file("trainer_state.json").write_text(json.dumps(state, indent=2) + "\n", encoding="utf-8")
    atomic_write_bytes(root / LATEST, f"{final.name}\n".encode())
    _prune(root, keep)
    logger.info("checkpoint %s written", final)
    return final


@contextlib.contextmanager
def _os_errors_of_safetensors() -> Iterator[None]:
    """safetensors reports a failed write (a full disk) as a SafetensorError whose message ends in
    `(os error N)`, no OSError: raised as the OSError it is, the folder commit names the checkpoint
    and keeps the previous one, and the command says what to do in one line."""
    from safetensors import SafetensorError

    try:
        yield
    except SafetensorError as exc:
        found = re.search(r"\(os error (\d+)\)", str(exc))
        if found is None:
            raise
        code = int(found.group(1))
        raise OSError(code, os.strerror(code)) from exc


def write_policy_files(folder: Path, model: HierarchicalPolicy, processor: Processor, recipe_text: str,
                       config: Mapping[str, Any], *, file: Callable[[str], Path] | None = None) -> None:
    """The inference files of a checkpoint into `folder`: weights, `config` as config.json, normalisation
    stats, recipe, tokenizer, and LeRobot's processor files (`lerobot_format`). `file` gives the path to
    write a file at (a folder commit's `tx.file`); default `folder / name`."""
    from safetensors.torch import save_model

    path = file or (lambda rel: Path(folder) / rel)
    save_model(model, str(path("model.safetensors")))
    path("config.json").write_text(json.dumps(dict(config), indent=2) + "\n", encoding="utf-8")
    stats = {"normalizer": processor.normalizer.to_dict(), "tools": processor.tools,
             "image_size": processor.image_size}
    path("stats.json").write_text(json.dumps(stats, indent=2) + "\n", encoding="utf-8")
    path("recipe.yaml").write_text(recipe_text, encoding="utf-8")
    for name, pipeline in processor_configs().items():
        path(name).write_text(json.dumps(pipeline, indent=2) + "\n", encoding="utf-8")
    processor.tokenizer.save_pretrained(str(Path(folder) / "tokenizer"))


def _recover_killed_saves(root: Path) -> None:
    """Finish or drop the saves a killed run left: the folder commit's `.<step>.steerable-*` siblings."""
    for name in sorted({p.name[1:].split(".steerable-")[0] for p in root.glob(".step_*.steerable-*")}):
        recover_folder(root / name)


def _step_folders(root: Path) -> list[Path]:
    """The checkpoints under `root`, oldest first: `step_*` folders holding weights. A step folder is whole
    once it exists (the folder commit); a save in flight is a hidden sibling, never one of them."""
    return sorted(p for p in root.glob("step_*") if (p / "model.safetensors").is_file())


def _prune(root: Path, keep: int) -> None:
    for old in _step_folders(root)[:-keep] if keep > 0 else []:
        shutil.rmtree(old, ignore_errors=True)


def latest_checkpoint(path: Path) -> Path | None:
    """The newest complete checkpoint under a training output folder, the folder itself if it is one."""
    path = Path(path)
    # The folder itself; LeRobot's step folder (`pretrained_model/` in it); a lerobot-train output folder.
    for where in (path, path / "pretrained_model", path / CHECKPOINTS / "last" / "pretrained_model"):
        if (where / "config.json").is_file() and (where / "model.safetensors").is_file():
            return where
    pointer = path / CHECKPOINTS / LATEST
    name = latest_name(pointer) if pointer.is_file() else None
    if name is not None and (path / CHECKPOINTS / name / "model.safetensors").is_file():
        return path / CHECKPOINTS / name
    # No pointer yet (a run killed between its first folder commit and the pointer write) or one that names
    # nothing: the newest step folder is the checkpoint.
    steps = _step_folders(path / CHECKPOINTS)
    return steps[-1] if steps else None


def latest_name(pointer: Path) -> str | None:
    """The checkpoint folder a `latest` pointer names, the one reader of its format: one line holding one folder
    name (at most `POINTER_MAX` bytes), the folder beside the pointer. None for any file that is not one."""
    try:
        with Path(pointer).open("rb") as handle:
            name = handle.read(POINTER_MAX + 1).decode("utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    if not name or len(name) > POINTER_MAX or "\n" in name or Path(name).name != name:
        return None
    return name


def load_policy(path: Path | str, device: str | torch.device = "cpu") -> LoadedPolicy:
    """Load a checkpoint (or the latest one under a training output folder) for inference."""
    from safetensors.torch import load_model

    where = latest_checkpoint(Path(path).expanduser())
    if where is None:
        raise ConfigError(f"{path} holds no policy checkpoint (no config.json + model.safetensors, and no "
                          "checkpoints/latest); train one with `steerable train`")
    config = json.loads((where / "config.json").read_text(encoding="utf-8"))
    # A setting the checkpoint does not name did not exist when it was written: its old value; and a
    # checkpoint from before the object description gets one built from its state's names, once, here.
    cfg = PolicyConfig.from_dict({**UNSAVED_BEFORE, **migrate_objects(policy_settings(config, where / "config.json"))})
    stats = json.loads((where / "stats.json").read_text(encoding="utf-8"))
    tokenizer = load_tokenizer(where / "tokenizer")
    backbone, size = build_backbone(cfg, len(tokenizer))
    model = HierarchicalPolicy(cfg, backbone)
    missing, unexpected = load_model(model, str(where / "model.safetensors"), strict=False, device="cpu")
    if missing == ["goal.embed.weight"] and not unexpected and model.goal is not None:
        # A goal head from before it had its own embeddings read the backbone's: the same start.
        with torch.no_grad():
            model.goal.embed.weight.copy_(model.backbone.embed(torch.arange(model.backbone.vocab_size)))
    elif missing or unexpected:
        raise ConfigError(f"{where / 'model.safetensors'} does not fit its config.json (missing "
                          f"{', '.join(missing) or 'nothing'}; unexpected {', '.join(unexpected) or 'nothing'})")
    model.to(device).eval()
    # Format 2 keeps the processor's image size in stats.json (config.json's image_size is a policy setting).
    image_size = int(stats.get("image_size") or config.get("image_size", size))
    processor = Processor(cfg, tokenizer, Normalizer(**stats["normalizer"]), image_size, stats.get("tools"))
    model.calibrate(processor.normalizer)
    return LoadedPolicy(model, processor, (where / "recipe.yaml").read_text(encoding="utf-8"), where)


def trained_on(path: Path | str) -> dict[str, Any]:
    """What the checkpoint at `path` was trained on ({"dataset": ..., "synthetic_difficulty": ...}); {} if unknown."""
    where = latest_checkpoint(Path(path).expanduser())
    if where is None:
        return {}
    try:
        config = json.loads((where / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    found = config.get("trained_on")
    return dict(found) if isinstance(found, dict) else {}


def dataset_provenance(dataset: Any) -> dict[str, Any]:
    """What a checkpoint records as `trained_on`: the dataset it learned from, and the task mix of a
    synthetic one (what `steerable run --eval_episodes` evaluates it on by default)."""
    from steerable.dataset.layout import GROUND_TRUTH_PATH

    out: dict[str, Any] = {"dataset": str(dataset.root)}
    truth = Path(dataset.root) / GROUND_TRUTH_PATH
    if truth.is_file():
        try:
            out["synthetic_difficulty"] = str(json.loads(truth.read_text(encoding="utf-8")).get("difficulty", "easy"))
        except (OSError, ValueError):
            logger.warning("cannot read %s: the task mix of this dataset is not recorded", truth)
    return out


def read_training_state(checkpoint: Path) -> dict[str, Any]:
    path = Path(checkpoint) / "trainer_state.json"
    if not path.is_file():
        raise ConfigError(f"{checkpoint} is not a training checkpoint (no trainer_state.json)")
    return dict(json.loads(path.read_text(encoding="utf-8")))


def _save_optimizer(optimizer: torch.optim.Optimizer, folder: Path) -> None:
    from safetensors.torch import save_file

    state = optimizer.state_dict()
    tensors: dict[str, torch.Tensor] = {}
    scalars: dict[str, dict[str, Any]] = {}
    for idx, entry in state["state"].items():
        for name, value in entry.items():
            if isinstance(value, torch.Tensor):
                tensors[f"{idx}.{name}"] = value.detach().cpu().contiguous()
            else:
                scalars.setdefault(str(idx), {})[name] = value
    save_file(tensors, str(folder / "optimizer.safetensors"))
    meta = {"param_groups": state["param_groups"], "scalars": scalars}
    (folder / "optimizer.json").write_text(json.dumps(meta) + "\n", encoding="utf-8")


def load_optimizer(optimizer: torch.optim.Optimizer, folder: Path) -> None:
    """Restore what `save_checkpoint` wrote into `optimizer` (built over the same parameters)."""
    from safetensors.torch import load_file

    tensors = load_file(str(Path(folder) / "optimizer.safetensors"))
    meta = json.loads((Path(folder) / "optimizer.json").read_text(encoding="utf-8"))
    state: dict[int, dict[str, Any]] = {}
    for key, value in tensors.items():
        idx, name = key.split(".", 1)
        state.setdefault(int(idx), {})[name] = value
    for idx, values in meta["scalars"].items():
        state.setdefault(int(idx), {}).update(values)
    optimizer.load_state_dict({"state": state, "param_groups": meta["param_groups"]})
