"""`steerable make-dataset synthetic --out DIR`: generate a dataset whose ground truth is known."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from steerable.errors import ConfigError

__all__ = ["register"]


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "make-dataset",
        help="generate a LeRobot v3 dataset with ground truth (a simulated tabletop)",
        description="Generate scripted tabletop demonstrations as a LeRobot v3 dataset, with "
        "meta/steerable_ground_truth.json holding the true subtasks, gripper events and object boxes.",
    )
    parser.add_argument("kind", choices=["synthetic"], help="what to generate")
    parser.add_argument("--out", required=True, type=Path, help="folder to create (must be new or empty)")
    parser.add_argument("--episodes", type=int, default=20, help="number of episodes (default 20)")
    parser.add_argument("--cameras", default="top,wrist", help="comma-separated cameras: top, wrist")
    parser.add_argument(
        "--camera_shapes",
        choices=["equal", "legacy"],
        default="equal",
        help="equal (default): both cameras 224x160, as `steerable run --env sim` renders them (policies that "
        "stack cameras need one shape); legacy: the wrist camera 128x128, as datasets made before",
    )
    parser.add_argument("--seed", type=int, default=0, help="random seed; same seed, same files")
    parser.add_argument("--fps", type=int, default=15, help="frames per second (default 15)")
    parser.add_argument(
        "--difficulty",
        choices=["easy", "realistic", "hard"],
        default="realistic",
        help="how much teleoperation mess to add: easy = clean scripted moves; realistic (default) and "
        "hard add hesitations, re-grasps, corrections, pushes, 3-4 step tasks, sensor noise, dropped "
        "frames, camera jitter, lighting changes and distractors",
    )
    parser.add_argument(
        "--with_language",
        action="store_true",
        help="write the ground truth as language columns (subtasks, plans, memory, interjections with "
        "`say` replies): oracle annotations",
    )
    parser.add_argument(
        "--interjection_rate",
        type=float,
        default=None,
        help="share of episodes where a person redirects a placement mid-way and the robot follows "
        "(default 0.5 with --with_language, else 0)",
    )
    parser.add_argument(
        "--privileged_state",
        action="store_true",
        help="also write every object's true position (cube x, y, z, present per colour; receptacle centre "
        "x, y, present per name) as observation.environment_state, for policies allowed privileged state",
    )
    parser.add_argument(
        "--overwrite", action="store_true", help="replace --out if it already holds a dataset"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from steerable.dataset.commit import commit_folder
    from steerable.dataset.info import load_info
    from steerable.progress import ProgressLine
    from steerable.synthetic import generate_synthetic

    out: Path = args.out.expanduser().resolve()
    _check_out(out, args.overwrite)
    cameras = [c.strip() for c in args.cameras.split(",") if c.strip()]
    started = time.perf_counter()
    # One folder commit around everything, language included: a failed run leaves any previous
    # dataset at `out` as it was.
    with commit_folder(out) as tx, ProgressLine("make-dataset", args.episodes) as progress:
        generate_synthetic(
            tx.root,
            episodes=args.episodes,
            cameras=cameras,
            seed=args.seed,
            fps=args.fps,
            difficulty=args.difficulty,
            with_language=args.with_language,
            interjection_rate=args.interjection_rate,
            privileged_state=args.privileged_state,
            camera_shapes=args.camera_shapes,
            on_episode=progress.advance,
        )
    info = load_info(out)
    print(
        f"{out}: {info.total_episodes} episodes, {info.total_frames} frames "
        f"({info.total_frames / info.fps:.1f} s at {info.fps} fps), {args.difficulty}"
        f"{', with oracle language' if args.with_language else ''}"
        f"{', with privileged state' if args.privileged_state else ''}, made in {time.perf_counter() - started:.1f} s"
    )
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
