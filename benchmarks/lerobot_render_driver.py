"""Render every frame of a LeRobot v3 dataset with LeRobot's own recipe renderer.

Run with a Python that has `lerobot` (0.6.x) and its `dataset` dependencies (`datasets`, `pyarrow`,
`pandas`, `pyyaml`); torch is not needed. LeRobot's package `__init__` files import torch, so the
three modules the renderer lives in (`lerobot.configs.recipe`, `lerobot.datasets.language`,
`lerobot.datasets.language_render`, plus `lerobot.utils.utils`) are loaded from their own files
under their real names, unmodified, with the parent packages registered as empty shells.

Frames are read as LeRobot's training reader does: `datasets.Dataset.from_parquet` over
`data/*/*.parquet` with the HF features derived from `meta/info.json` (LeRobot's language
features for the two language columns), one `dataset[i]` per frame, the task string looked up in
`meta/tasks.parquet`; each frame then goes through `render_sample` with the arguments
`RenderMessagesStep` passes (timestamp, global `index` as sample_idx, the frame's task).

Usage: python lerobot_render_driver.py DATASET RECIPE.yaml [--json]
Prints `samples=N frames=M` on stderr; with --json, one JSON line per frame on stdout (the fields of
`steerable render --json`). `render.py --lerobot_python PATH` runs it against `steerable render`.
LeRobot 0.6.1 ships no recipe files and its loader refuses steerable's built-ins, so render.py hands
both sides one file that 0.6.1 accepts (`LEROBOT_061_RECIPE` there).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import sys
import types
from pathlib import Path


def _load_lerobot_renderer():
    spec = importlib.util.find_spec("lerobot")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("lerobot is not installed in this Python")
    root = Path(next(iter(spec.submodule_search_locations)))
    for name in ("configs", "datasets", "utils"):
        shell = types.ModuleType(f"lerobot.{name}")
        shell.__path__ = [str(root / name)]
        sys.modules[shell.__name__] = shell
    recipe_mod = importlib.import_module("lerobot.configs.recipe")
    language = importlib.import_module("lerobot.datasets.language")
    render = importlib.import_module("lerobot.datasets.language_render")
    return recipe_mod.load_recipe, language, render.render_sample


def _hf_features(info_features: dict, language, datasets):
    out = {}
    for key, ft in info_features.items():
        shape = tuple(ft.get("shape") or ())
        if key == language.LANGUAGE_PERSISTENT:
            out[key] = language.language_persistent_column_feature()
        elif key == language.LANGUAGE_EVENTS:
            out[key] = language.language_events_column_feature()
        elif ft["dtype"] in ("video", "image"):
            continue
        elif shape == (1,):
            out[key] = datasets.Value(ft["dtype"])
        else:
            out[key] = datasets.Sequence(datasets.Value(ft["dtype"]), length=shape[0])
    return datasets.Features(out)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("dataset", type=Path)
    ap.add_argument("recipe", type=Path)
    ap.add_argument("--json", action="store_true", help="one JSON line per frame on stdout")
    args = ap.parse_args()

    load_recipe, language, render_sample = _load_lerobot_renderer()
    import datasets
    import pandas as pd

    datasets.disable_progress_bars()
    recipe = load_recipe(args.recipe)
    info = json.loads((args.dataset / "meta" / "info.json").read_text())
    paths = sorted(str(p) for p in (args.dataset / "data").glob("*/*.parquet"))
    frames = datasets.Dataset.from_parquet(paths, features=_hf_features(info["features"], language, datasets))
    tasks = pd.read_parquet(args.dataset / "meta" / "tasks.parquet")

    out = sys.stdout
    samples = 0
    for i in range(len(frames)):
        item = frames[i]
        persistent = item.get(language.LANGUAGE_PERSISTENT) or []
        events = item.get(language.LANGUAGE_EVENTS) or []
        rendered = None
        if persistent or events:  # RenderMessagesStep passes frames without language through
            rendered = render_sample(
                recipe=recipe, persistent=persistent, events=events, t=item["timestamp"],
                sample_idx=int(item["index"]), task=tasks.iloc[item["task_index"]].name,
            )
        samples += rendered is not None
        if args.json:
            line = {"index": item["index"], "episode_index": item["episode_index"],
                    "frame_index": item["frame_index"], **(rendered or {})}
            out.write(json.dumps(line) + "\n")
    print(f"samples={samples} frames={len(frames)}", file=sys.stderr)


if __name__ == "__main__":
    main()
