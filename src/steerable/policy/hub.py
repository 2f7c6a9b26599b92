"""`--push_to_hub`: a policy checkpoint folder to a Hub model repository, with its model card.

The upload itself (and its errors) is the one Hub gateway's, `steerable.dataset.hub`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from steerable.dataset.hub import upload_folder
from steerable.policy.lerobot_format import policy_settings

__all__ = ["model_card", "push_checkpoint"]

# Training-only files: a pushed checkpoint is for inference.
_TRAINING_ONLY = ["optimizer.safetensors", "optimizer.json", "trainer_state.json",
                  "training_weights.safetensors"]  # averaging.TRAINING_WEIGHTS (torch-free here)


def model_card(folder: Path) -> str:
    config = policy_settings(json.loads((folder / "config.json").read_text(encoding="utf-8")), folder / "config.json")
    return (
        "---\nlibrary_name: steerable\ntags: [robotics, lerobot, vision-language-action]\n---\n"
        f"# {folder.name}\n\nA hierarchical vision-language-action policy trained with "
        "[steerable](https://pypi.org/project/steerable/) (`steerable train`): a vision-language backbone "
        f"(`{config['backbone']}`) that writes subtasks, plans, memory and `say` replies, and a flow-matching "
        f"action expert that predicts chunks of {config['chunk_size']} actions.\n\n"
        f"Cameras: {', '.join(config['cameras']) or 'none'}; state `{config['state_key']}` "
        f"({config['state_mode']}); action `{config['action_key']}`. The recipe it was trained on is "
        "`recipe.yaml`; normalisation statistics are in `stats.json`.\n\n"
        "```bash\nsteerable run --env sim --high_level policy --low_level policy --policy.path PATH\n```\n"
    )


def push_checkpoint(folder: Path, repo_id: str, *, private: bool = False, api: Any | None = None) -> str:
    """Upload `folder` (weights, config, tokenizer, recipe, stats, card) to `repo_id`; returns its URL."""
    uploaded = upload_folder(
        folder, repo_id, repo_type="model", card=model_card(folder), private=private, api=api,
        commit_message="Upload policy (steerable train)", ignore_patterns=_TRAINING_ONLY,
    )
    return uploaded.url
