"""`steerable make-dataset synthetic --out DIR`: generate a dataset whose ground truth is known;
`steerable make-dataset metaworld --tasks TASKS --episodes N --out DIR`: record Meta-World's scripted
policies (docs/metaworld.md).

Its options are a settings tree (`MakeDatasetSettings`), read as `train`, `annotate` and `run` read
theirs (`steerable.cli.flags`): a mistyped option is one line naming the closest one, `--config
FILE.yaml` sets any of them, and `--out` has the other commands' spelling `--output_dir` too.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import ClassVar, Literal

from pydantic import AliasChoices, ConfigDict, Field

from steerable.errors import ConfigError
from steerable.settings import Settings

__all__ = ["MakeDatasetSettings", "MakeMetaWorldSettings", "register"]

KINDS = ("synthetic", "metaworld")

USAGE = """usage: steerable make-dataset synthetic --out DIR [--episodes N] [--cameras top,wrist] [--difficulty D] [...]

Generate scripted tabletop demonstrations as a LeRobot v3 dataset, with meta/steerable_ground_truth.json
holding the true subtasks, gripper events and object boxes. Every option, with its default:
"""


class MakeDatasetSettings(Settings):
    """`steerable make-dataset synthetic`: what to generate, and where."""

    model_config = ConfigDict(extra="forbid")
    doc: ClassVar[str | None] = "docs/make-dataset.md"

    out: Path = Field(validation_alias=AliasChoices("out", "output_dir"),
                      description="folder to create (must be new or empty)")
    episodes: int = Field(20, description="number of episodes")
    cameras: list[str] = Field(["top", "wrist"], description="comma-separated cameras: top, wrist")
    camera_shapes: Literal["equal", "legacy"] = Field(
        "equal", description="equal: both cameras 224x160, as `steerable run --env sim` renders them (policies that "
        "stack cameras need one shape); legacy: the wrist camera 128x128, as datasets made before")
    seed: int = Field(0, description="random seed; same seed, same files")
    fps: int = Field(15, description="frames per second")
    difficulty: Literal["easy", "realistic", "hard"] = Field(
        "realistic", description="how much teleoperation mess to add: easy = clean scripted moves; realistic and "
        "hard add hesitations, re-grasps, corrections, pushes, 3-4 step tasks, sensor noise, dropped frames, camera "
        "jitter, lighting changes and distractors")
    with_language: bool = Field(
        False, description="write the ground truth as language columns (subtasks, plans, memory, interjections with "
        "`say` replies): oracle annotations")
    interjection_rate: float | None = Field(
        None, description="share of episodes where a person redirects a placement mid-way and the robot follows "
        "(default 0.5 with --with_language, else 0)")
    privileged_state: bool = Field(
        False, description="also write every object's true position (cube x, y, z, present per colour; receptacle "
        "centre x, y, present per name) as observation.environment_state, for policies allowed privileged state")
    overwrite: bool = Field(False, description="replace --out if it already holds a dataset")


METAWORLD_USAGE = """usage: steerable make-dataset metaworld --tasks TASKS --episodes N --out DIR [--image_size PX] [..]

Record Meta-World's own scripted policies as a LeRobot v3 dataset with LeRobot's Meta-World features
(observation.image, a 4-d observation.state, a 4-d action; LeRobot's task description as the task), and their
phases as oracle subtask rows where they are named (docs/metaworld.md). Needs `pip install 'steerable[metaworld]'`
and, without a GPU, MUJOCO_GL=osmesa. Every option, with its default:
"""


class MakeMetaWorldSettings(Settings):
    """`steerable make-dataset metaworld`: which tasks, how many demonstrations, and where."""

    model_config = ConfigDict(extra="forbid")
    doc: ClassVar[str | None] = "docs/metaworld.md"

    out: Path = Field(validation_alias=AliasChoices("out", "output_dir"),
                      description="folder to create (must be new or empty)")
    tasks: str = Field(description="comma-separated Meta-World tasks as LeRobot's env names them (reach-v3,push-v3) "
                       "or its groups (easy, medium, hard, very_hard)")
    episodes: int = Field(10, description="successful episodes per task")
    image_size: int = Field(64, description="camera image side in pixels (LeRobot's env renders 480; a CPU renders "
                            "64 several times faster, and the policy resizes either)")
    seed: int = Field(0, description="first episode seed of each task (lerobot-eval's seeds start at 1000)")
    max_steps: int = Field(500, description="steps before an episode that has not succeeded is dropped "
                           "(Meta-World's own limit: 500)")
    overwrite: bool = Field(False, description="replace --out if it already holds a dataset")


def register(sub: argparse._SubParsersAction) -> None:
    from steerable.cli.flags import add_command

    add_command(sub, "make-dataset", help="generate a LeRobot v3 dataset with ground truth (a simulated tabletop)",
                func=run)


def run(args: argparse.Namespace) -> int:
    from steerable.cli.flags import parse_command
    from steerable.dataset.commit import commit_folder
    from steerable.dataset.info import load_info
    from steerable.progress import ProgressLine
    from steerable.synthetic import generate_synthetic

    options = list(args.options)
    kind = options.pop(0) if options and not options[0].startswith("-") else None
    args.options = options
    if kind == "metaworld":
        return _metaworld(args)
    cfg = parse_command(MakeDatasetSettings, args, USAGE)
    if cfg is None:
        return 0
    if kind not in KINDS:
        raise ConfigError(f"make-dataset needs the kind of dataset first, one of {', '.join(KINDS)} "
                          f"(got {kind or 'none'}): steerable make-dataset synthetic --out DIR")
    out = cfg.out.expanduser().resolve()
    _check_out(out, cfg.overwrite)
    started = time.perf_counter()
    # One folder commit around everything, language included: a failed run leaves any previous
    # dataset at `out` as it was.
    with commit_folder(out) as tx, ProgressLine("make-dataset", cfg.episodes) as progress:
        generate_synthetic(
            tx.root,
            episodes=cfg.episodes,
            cameras=[c.strip() for c in cfg.cameras if c.strip()],
            seed=cfg.seed,
            fps=cfg.fps,
            difficulty=cfg.difficulty,
            with_language=cfg.with_language,
            interjection_rate=cfg.interjection_rate,
            privileged_state=cfg.privileged_state,
            camera_shapes=cfg.camera_shapes,
            on_episode=progress.advance,
        )
    info = load_info(out)
    print(
        f"{out}: {info.total_episodes} episodes, {info.total_frames} frames "
        f"({info.total_frames / info.fps:.1f} s at {info.fps} fps), {cfg.difficulty}"
        f"{', with oracle language' if cfg.with_language else ''}"
        f"{', with privileged state' if cfg.privileged_state else ''}, made in {time.perf_counter() - started:.1f} s"
    )
    return 0


def _metaworld(args: argparse.Namespace) -> int:
    from steerable.cli.flags import parse_command
    from steerable.dataset.commit import commit_folder
    from steerable.dataset.info import load_info
    from steerable.progress import ProgressLine
    from steerable.synthetic.metaworld import load_tasks, record_metaworld

    cfg = parse_command(MakeMetaWorldSettings, args, METAWORLD_USAGE)
    if cfg is None:
        return 0
    total = len(load_tasks().expand(cfg.tasks)) * max(cfg.episodes, 0)
    out = cfg.out.expanduser().resolve()
    _check_out(out, cfg.overwrite)
    started = time.perf_counter()
    with commit_folder(out) as tx, ProgressLine("make-dataset metaworld", total) as progress:
        tried = record_metaworld(tx.root, tasks=cfg.tasks, episodes=cfg.episodes, image_size=cfg.image_size,
                                 seed=cfg.seed, max_steps=cfg.max_steps, on_episode=progress.advance)
    info = load_info(out)
    print(f"{out}: {info.total_episodes} episodes of {len(tried)} Meta-World task(s) ({sum(tried.values())} seeds "
          f"tried), {info.total_frames} frames at {info.fps} fps, {cfg.image_size}x{cfg.image_size} images, made in "
          f"{time.perf_counter() - started:.1f} s")
    return 0


def _check_out(out: Path, overwrite: bool) -> None:
    if not out.exists():
        return
    if not out.is_dir():
        raise ConfigError(f"--out {out} is a file; pass a folder path")
    if not any(out.iterdir()):
        return
    if not overwrite:
        raise ConfigError(f"--out {out} is not empty; pass --overwrite to replace it, or choose a new folder")
    if not (out / "meta" / "info.json").is_file():
        raise ConfigError(
            f"refusing to overwrite {out}: it is not a LeRobot dataset (no meta/info.json); "
            "delete it yourself or choose a new folder"
        )
