"""`steerable sheets DATASET --episode E --out DIR`: write the contact sheets the plan module shows a model."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import ClassVar

from pydantic import Field

from steerable.cli.options import dataset_field
from steerable.settings import Settings

__all__ = ["SheetsSettings", "register"]

USAGE = """usage: steerable sheets DATASET --episode E --out DIR [--camera KEY] [--frames_per_second F]

Write an episode's timestamped contact sheets, what the plan module's model sees, as JPEG files.
Every option, with its default:
"""


class SheetsSettings(Settings):
    """`steerable sheets`: which episode's sheets, and where."""

    positional: ClassVar[tuple[str, ...]] = ("dataset",)
    doc: ClassVar[str | None] = "docs/sheets.md"

    dataset: str = dataset_field("local dataset root, or a Hub repo id (downloaded first)")
    episode: int = Field(description="episode index")
    out: Path = Field(description="folder for the JPEG files (created if needed)")
    camera: str | None = Field(None, description="camera feature (default: the first video camera)")
    frames_per_second: float | None = Field(None, description="sampling rate (default: --plan.frames_per_second's)")
    revision: str | None = Field(None, description="Hub revision (default: the v3.0 tag)")


def register(sub: argparse._SubParsersAction) -> None:
    from steerable.cli.flags import add_command

    add_command(sub, "sheets", func=run,
                help="write an episode's timestamped contact sheets (what the plan module's model sees) as JPEG")


def run(args: argparse.Namespace) -> int:
    from steerable.cli.flags import parse_command

    cfg = parse_command(SheetsSettings, args, USAGE)
    return 0 if cfg is None else _write(cfg)


def _write(args: SheetsSettings) -> int:
    from steerable.annotate.modules.plan.config import PlanConfig
    from steerable.annotate.modules.plan.preview import episode_sheets
    from steerable.dataset import open_dataset
    from steerable.dataset.atomic import atomic_write_bytes, atomic_write_json, check_writable
    from steerable.errors import ConfigError

    check_writable(args.out, inside=True, hint="choose another --out")  # before any work
    dataset = open_dataset(args.dataset, revision=args.revision)
    camera = args.camera or next(iter(dataset.camera_keys), None)
    settings = {} if args.frames_per_second is None else {"frames_per_second": args.frames_per_second}
    plan = PlanConfig()
    limit = plan.max_frames_per_second()
    if args.frames_per_second is not None and not 0 < args.frames_per_second < limit:
        # Name our own flag: the plan module's window settings are not options of this command.
        raise ConfigError(
            f"--frames_per_second must be above 0 and below {limit:g}: with the plan module's windows "
            f"({plan.max_frames_per_prompt} frames, {plan.window_overlap_s:g} s shared by neighbours) "
            "a higher rate would put every frame in three windows"
        )
    windows = episode_sheets(dataset, args.episode, camera=camera, config=PlanConfig(**settings))
    index: list[dict[str, object]] = []
    frames = 0
    for window in windows:
        for number, sheet in enumerate(window.sheets):
            name = f"episode_{args.episode:06d}_{camera}_w{window.window:02d}_s{number:02d}.jpg"
            atomic_write_bytes(args.out / name, sheet.jpeg)
            index.append({"file": name, "window": window.window, "times": sheet.times})
            frames += len(sheet.times)
    atomic_write_json(args.out / f"episode_{args.episode:06d}_{camera}_sheets.json", index)
    print(f"wrote {len(index)} sheet(s) of {frames} frames in {len(windows)} window(s) to {args.out}")
    return 0
