"""How well a `--policy.keypoints` checkpoint finds where its commands end (issue 35).

Reads low-level items of the checkpoint's held-out episodes (as `steerable train` split them) and
reports, for the first two pose dimensions (x, y on the simulator, in the state's units: metres there),
the distance from where each command's segment ends to (a) the nearest of the keypoints' places, what
the places learn (every end pulls its nearest place), and (b) the place the command chose, what the
action expert reads. "far" items: the hand more than `--far` (5 cm) from the end, a command's start,
where only the image can tell where to go.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/keypoint_places.py --run runs/kp --data /tmp/easy200

Not part of `make test`: a minute of CPU.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import cast

import numpy as np
import torch

from steerable.dataset import open_dataset
from steerable.policy.checkpoint import latest_checkpoint, load_policy
from steerable.policy.data import PolicyDataset, action_components
from steerable.recipes import load_recipe
from steerable.train import collate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", required=True, type=Path, help="a steerable train output folder")
    parser.add_argument("--data", required=True, help="the dataset it trained on")
    parser.add_argument("--items", type=int, default=600)
    parser.add_argument("--far", type=float, default=0.05)
    args = parser.parse_args()
    torch.set_num_threads(1)
    checkpoint = latest_checkpoint(args.run)
    if checkpoint is None:
        raise SystemExit(f"no checkpoint in {args.run}")
    loaded = load_policy(checkpoint)
    model, processor = loaded.model.eval(), loaded.processor
    if model.keypoints is None or model.keypoints.chosen_in is None:
        raise SystemExit(f"{checkpoint} has no keypoint places: train with --policy.keypoints K and a state")
    held = json.loads((checkpoint / "trainer_state.json").read_text())["eval_episodes"]
    recipe = load_recipe(checkpoint / "recipe.yaml")
    data = PolicyDataset(open_dataset(args.data), recipe, model.cfg, processor.image_size, episodes=held,
                         component=action_components(recipe)[0])
    pose = cast(torch.Tensor, model.pose_index)  # a registered buffer
    low = torch.tensor(processor.normalizer.state_min, dtype=torch.float32)[pose]
    span = torch.tensor(processor.normalizer.state_max, dtype=torch.float32)[pose] - low
    metres = lambda x: low + (x.float() + 1) / 2 * span  # noqa: E731  (normalised -> state units)
    nearest, chosen, away = [], [], []
    pick = np.random.default_rng(0).choice(len(data), size=min(args.items, len(data)), replace=False)
    for j in range(0, len(pick), 50):
        collated = collate([data[int(i)] for i in pick[j:j + 50]])
        if collated is None:  # no frame of these could be read
            continue
        batch = processor.training_batch(collated)
        known = torch.isfinite(batch["goal"]).all(-1) & batch["predict_actions"].bool()
        with torch.no_grad():
            enc = model.encode(batch["images"][known], batch["state"][known], batch["input_ids"][known],
                               batch["attention_mask"][known])
        assert enc.keypoints is not None and enc.keypoints.places is not None and enc.choice is not None
        places, goal = metres(enc.keypoints.places), metres(batch["goal"][known][:, pose])
        here = metres(batch["state"][known][:, pose])
        choice = (enc.choice.softmax(-1)[..., None] * places).sum(1)
        nearest.append((places - goal[:, None])[..., :2].norm(dim=-1).min(1).values)
        chosen.append((choice - goal)[:, :2].norm(dim=-1))
        away.append((here - goal)[:, :2].norm(dim=-1) > args.far)
    near_all, chose_all, far = torch.cat(nearest), torch.cat(chosen), torch.cat(away)
    print(f"{len(near_all)} held-out low-level items ({int(far.sum())} far) of {len(held)} episodes")
    for name, values in (("nearest place", near_all), ("chosen place", chose_all)):
        print(f"{name}: median {values.median():.4f}, far median {values[far].median():.4f}, "
              f"p90 {values.quantile(0.9):.4f}")
    print(f"RESULT nearest_median={near_all.median():.4f} nearest_far_median={near_all[far].median():.4f} "
          f"chosen_median={chose_all.median():.4f} chosen_far_median={chose_all[far].median():.4f}")


if __name__ == "__main__":
    main()
